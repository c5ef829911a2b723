package harness

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Interval is how often Poll checks its condition.
const Interval = 20 * time.Millisecond

// ErrTimeout is returned when a polled condition did not hold in time.
var ErrTimeout = errors.New("harness: timed out")

// Poll checks cond every Interval until it holds. It returns ErrTimeout
// (wrapped with timeout) when timeout passes first, or ctx's error when ctx
// ends.
func Poll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%w after %s", ErrTimeout, timeout)
		}
		if !Sleep(ctx, Interval) {
			return ctx.Err()
		}
	}
	return nil
}

// Sleep waits d or until ctx ends and reports whether d passed. It paces
// (retries, reconnects, load); it never synchronises.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
