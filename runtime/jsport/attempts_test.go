package jsport

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A consumer request lost in a stream's election (unanswered, no
// responders, "temporarily unavailable") is sent again; any other answer
// is final, and so is the caller's deadline.
func TestConsumerAttempts(t *testing.T) {
	t.Parallel()
	unanswered := func(actx context.Context) error { <-actx.Done(); return actx.Err() }
	for _, tc := range []struct {
		name  string
		first func(context.Context) error
		calls int
		fails bool
	}{
		{"unanswered", unanswered, 2, false},
		{"no responders", func(context.Context) error { return nats.ErrNoResponders }, 2, false},
		{"no leader yet", func(context.Context) error {
			return &jetstream.APIError{Code: 503, ErrorCode: 10008} // JSClusterNotAvailErr
		}, 2, false},
		{"no response from stream", func(context.Context) error { return jetstream.ErrNoStreamResponse }, 2, false},
		{"refused", func(context.Context) error { return jetstream.ErrConsumerExists }, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			err := attempts(context.Background(), func(actx context.Context) error {
				calls++
				if calls == 1 {
					return tc.first(actx)
				}
				return nil
			})
			if calls != tc.calls || (err != nil) != tc.fails {
				t.Fatalf("%d calls, err %v; want %d calls, failing %v", calls, err, tc.calls, tc.fails)
			}
		})
	}
	t.Run("the caller's deadline ends it", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		began := time.Now()
		err := attempts(ctx, func(context.Context) error { return nats.ErrNoResponders })
		if !errors.Is(err, nats.ErrNoResponders) || time.Since(began) > 2*time.Second {
			t.Fatalf("err %v after %s", err, time.Since(began))
		}
	})
}
