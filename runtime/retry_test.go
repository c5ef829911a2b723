package runtime_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/baton-rt/baton/runtime"
)

// The policy's waits: the entry for retry n, the last repeating; none
// without a backoff.
func TestRetryPolicyDelay(t *testing.T) {
	p := runtime.RetryPolicy{Retries: 4, Backoff: []time.Duration{time.Second, 5 * time.Second}}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 5 * time.Second, 3: 5 * time.Second, 4: 5 * time.Second} {
		if got := p.Delay(n); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
	if got := (runtime.RetryPolicy{Retries: 2}).Delay(1); got != 0 {
		t.Errorf("no backoff: Delay(1) = %v", got)
	}
}

// Retryable marks an error through wrapping; only the three codes of a
// failure outside the agent's control are retried.
func TestRetryable(t *testing.T) {
	if runtime.Retryable(nil) != nil {
		t.Fatal("Retryable(nil) is not nil")
	}
	base := errors.New("429 too many requests")
	err := fmt.Errorf("model: %w", runtime.Retryable(base))
	if !runtime.IsRetryable(err) || !errors.Is(err, base) || err.Error() != "model: 429 too many requests" {
		t.Fatalf("wrapped: %v retryable=%v is=%v", err, runtime.IsRetryable(err), errors.Is(err, base))
	}
	if runtime.IsRetryable(base) {
		t.Fatal("an unmarked error is retryable")
	}
	for code, want := range map[string]bool{
		runtime.CodeAgentTimeout: true, runtime.CodeAgentUnavailable: true, runtime.CodeAgentRetryable: true,
		runtime.CodeAgentPanic: false, runtime.CodeResultInvalid: false, runtime.CodeEventInvalid: false,
		runtime.CodeStepTimeout: false, runtime.CodeAgentRequestTooLarge: false, "": false,
	} {
		if runtime.RetryableCode(code) != want {
			t.Errorf("RetryableCode(%q) = %v", code, !want)
		}
	}
}
