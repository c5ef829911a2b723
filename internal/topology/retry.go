package topology

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The server's answers that a cluster gives while it settles: right after
// it starts, or while a node is down or slow to report, the meta leader may
// see too few peers online to place a replicated stream (10005) or be
// electing (10008, or no answer at all).
const (
	codeNoPeers         jetstream.ErrorCode = 10005 // JSClusterNoPeersErr: no suitable peers for placement
	codeClusterNotAvail jetstream.ErrorCode = 10008 // JSClusterNotAvailErr
)

// settleWait bounds how long Ensure waits out a settling cluster when its
// context has no deadline; settlePause is the first pause between
// attempts, doubled up to settlePauseMax.
const (
	settleWait     = 30 * time.Second
	settleAttempt  = 5 * time.Second // one attempt: an unanswered request is sent again
	settlePause    = 250 * time.Millisecond
	settlePauseMax = 2 * time.Second
)

// settling reports an answer another attempt may not meet.
func settling(err error) bool {
	var api *jetstream.APIError
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.As(err, &api) && (api.ErrorCode == codeNoPeers || api.ErrorCode == codeClusterNotAvail)
}

// retrySettling runs op, each attempt bounded by settleAttempt, again
// while it fails with an answer of a settling cluster, until ctx ends (settleWait when it has no deadline). Each
// ensure step is idempotent (it creates what is missing and reconciles
// what exists), so another attempt is safe.
func retrySettling(ctx context.Context, op func(context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, settleWait)
		defer cancel()
	}
	pause := settlePause
	for {
		actx, cancel := context.WithTimeout(ctx, settleAttempt)
		err := op(actx)
		cancel()
		if err == nil || !settling(err) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, settlePauseMax)
	}
}
