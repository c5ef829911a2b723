package kv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/cenkalti/backoff/v4"
)

// settlePolicy paces the leader reads and the repeated CAS of SettleUpdate:
// every write whose outcome is unknown is settled at this pace, and its
// caller's context bounds how long (DESIGN §5). It starts at the pace of a
// lost reply and slows to one try a second while a stream elects a leader.
func settlePolicy(ctx context.Context) backoff.BackOff {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(50*time.Millisecond),
		backoff.WithMaxInterval(time.Second),
		backoff.WithMaxElapsedTime(0), // the context bounds it
	)
	return backoff.WithContext(b, ctx)
}

// definite reports whether err is an answer of the store that settles a
// write: refused for its content, or a conflict. Anything else (a lost
// reply, no leader, a timeout) leaves the write's outcome unknown.
func definite(err error) bool {
	return errors.Is(err, record.ErrConflict) || errors.Is(err, record.ErrInvalid) || errors.Is(err, record.ErrTooLarge)
}

// UpdateSessionSettled is UpdateSession whose uncertain outcome is settled
// (SettleUpdate) instead of returned: the answer is the new revision, or
// record.ErrConflict (another write came first), or the store's refusal
// (record.ErrInvalid, record.ErrTooLarge), or the context's error.
func (s *Store) UpdateSessionSettled(ctx context.Context, rec record.SessionRecord, rev uint64, gate func(context.Context) error) (uint64, error) {
	n, err := s.UpdateSession(ctx, rec, rev)
	if err == nil || definite(err) {
		return n, err
	}
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	return s.SettleUpdate(ctx, rec, rev, gate)
}

// SettleUpdate settles a write of rec at rev whose outcome is unknown — its
// reply was lost, or the stream had no leader — the one way every record
// write of Baton is settled (DESIGN §5): a leader read that finds rec's
// writer stamp (Writer, WriteCounter) means it landed, and its revision is
// returned; a record still at rev means it did not land and nobody wrote
// since, so the same CAS is sent again — after gate (nil: none; a fenced
// owner's gate fails, and its error is returned) — and settled again if
// its outcome is unknown too; a record anyone else wrote since is
// record.ErrConflict. A write sent again can also land late; the next
// leader read finds it. Reads and writes that fail are repeated at the
// pace of settlePolicy until ctx ends.
func (s *Store) SettleUpdate(ctx context.Context, rec record.SessionRecord, rev uint64, gate func(context.Context) error) (uint64, error) {
	b := settlePolicy(ctx)
	var last error
	for {
		cur, landed, err := s.Settle(ctx, rec.SessionID, rec.Writer, rec.WriteCounter)
		switch {
		case err != nil:
			last = err
		case landed:
			return cur.Revision, nil
		case cur.Revision != rev:
			return 0, fmt.Errorf("%w: session %s: the write at revision %d did not land and the record is at %d",
				record.ErrConflict, rec.SessionID, rev, cur.Revision)
		default:
			if gate != nil {
				if err := gate(ctx); err != nil {
					return 0, err
				}
			}
			n, err := s.UpdateSession(ctx, rec, rev)
			switch {
			case err == nil:
				return n, nil
			case errors.Is(err, record.ErrInvalid), errors.Is(err, record.ErrTooLarge):
				return 0, err
			}
			// Unknown again, or a conflict that the first write's late
			// landing may explain: the next leader read decides.
			last = err
		}
		wait := b.NextBackOff()
		if wait == backoff.Stop || ctx.Err() != nil {
			return 0, unsettled(ctx, rec.SessionID, rev, last)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, unsettled(ctx, rec.SessionID, rev, last)
		case <-t.C:
		}
	}
}

// unsettled is the error of a settle that ctx ended: the context's error,
// with the store's last answer.
func unsettled(ctx context.Context, id string, rev uint64, last error) error {
	err := ctx.Err()
	if err == nil {
		err = context.Canceled
	}
	if last == nil {
		return fmt.Errorf("kv: settle the write of session %s at revision %d: %w", id, rev, err)
	}
	return fmt.Errorf("kv: settle the write of session %s at revision %d: %w (last: %w)", id, rev, err, last)
}
