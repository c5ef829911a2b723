package topology

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A cluster that is settling (a peer the meta leader sees offline, an
// election) is waited out; any other answer, and the caller's deadline,
// are final.
func TestRetrySettling(t *testing.T) {
	t.Parallel()
	noPeers := fmt.Errorf("topology: create bucket baton_journal: %w",
		&jetstream.APIError{Code: 400, ErrorCode: codeNoPeers, Description: "no suitable peers for placement, peer offline"})
	for _, tc := range []struct {
		name      string
		answers   []error
		wantCalls int
		wantErr   error
	}{
		{"no suitable peers, twice", []error{noPeers, noPeers, nil}, 3, nil},
		{"no meta leader, no responders", []error{&jetstream.APIError{ErrorCode: codeClusterNotAvail}, nats.ErrNoResponders, nil}, 3, nil},
		{"incompatible is final", []error{&IncompatibleError{Resource: "BATON_INBOX", Field: "retention"}}, 1, ErrIncompatible},
		{"another API error is final", []error{&jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamNameInUse}}, 1, jetstream.ErrStreamNameAlreadyInUse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			err := retrySettling(context.Background(), func(context.Context) error {
				calls++
				return tc.answers[min(calls, len(tc.answers))-1]
			})
			if calls != tc.wantCalls {
				t.Fatalf("%d calls, want %d", calls, tc.wantCalls)
			}
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
		})
	}
	t.Run("the caller's deadline ends the wait", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 600*time.Millisecond)
		defer cancel()
		began := time.Now()
		err := retrySettling(ctx, func(context.Context) error { return noPeers })
		if !errors.Is(err, noPeers) || time.Since(began) > 5*time.Second {
			t.Fatalf("err %v after %v", err, time.Since(began))
		}
	})
}
