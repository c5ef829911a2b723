package runtime

import (
	"errors"
	"slices"
	"time"

	"github.com/baton-rt/baton/wire"
)

// RetryPolicy is how a deployment retries a step that failed for a reason
// outside the agent's control: its remote worker died or went silent
// (agent_timeout), no worker answered (agent_unavailable), or an
// in-process agent returned an error wrapped with [Retryable]
// (agent_retryable). The step runs again with the same input and journal
// (calls already recorded are not made again), after Backoff, each retry
// recorded as turn.step_retried. Nothing else is retried: a panic, an
// invalid result or event, a step timeout, a limit, a cancel.
//
// The zero RetryPolicy retries nothing.
type RetryPolicy struct {
	// Retries is how many times one step runs again (0: never); a step
	// runs at most Retries+1 times.
	Retries int
	// Backoff is the wait before the first, second, … retry, the last
	// entry repeating (empty: none). The session's other commands are
	// received meanwhile, and a cancel cancels the turn.
	Backoff []time.Duration
}

// Delay is the wait before retry n (1 for the first).
func (p RetryPolicy) Delay(n int) time.Duration {
	if len(p.Backoff) == 0 || n < 1 {
		return 0
	}
	return p.Backoff[min(n, len(p.Backoff))-1]
}

// RetryableCode reports whether a step failed with code is retried: the
// codes of a failure outside the agent's control.
func RetryableCode(code string) bool {
	return slices.Contains(retryableCodes, code)
}

var retryableCodes = []string{CodeAgentTimeout, CodeAgentUnavailable, CodeAgentRetryable}

// Retryable marks err as a transient failure of an in-process agent's
// step (a rate limit, a connection reset): the step fails with code
// agent_retryable and runs again under the deployment's [RetryPolicy]
// (bin/owner --step-retries, --step-retry-backoff). A nil err stays nil.
// After the last attempt the step fails as any error does.
//
//	if resp.StatusCode == http.StatusTooManyRequests {
//		return runtime.StepResult{}, runtime.Retryable(fmt.Errorf("model: %s", resp.Status))
//	}
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &RetryableError{Err: err}
}

// RetryableError is an error marked with [Retryable]; errors.As finds it
// through wrapping.
type RetryableError struct{ Err error }

func (e *RetryableError) Error() string { return e.Err.Error() }

// Unwrap returns the marked error.
func (e *RetryableError) Unwrap() error { return e.Err }

// IsRetryable reports whether err, or an error it wraps, was marked with
// [Retryable].
func IsRetryable(err error) bool {
	var r *RetryableError
	return errors.As(err, &r)
}

// StepRetry describes a [RunStep] that runs a step again.
type StepRetry struct {
	Attempt int           // the attempt this run is: 2 for the first retry
	After   time.Duration // the driver waits this long before the step starts
	Code    string        // the code the previous attempt failed with
}

// retrying is the step of the open turn that runs again, and how.
type retrying struct {
	turnID string
	step   int
	next   StepRetry
}

// retryStep decides, for a failed step r of turn t, whether it runs again
// under the policy: its code is retryable, it is not fatal, and it has
// not run Retries+1 times. A retry records turn.step_retried and leaves the
// turn as it was (the same step is due, with the same inputs: steering
// waits for the step after, so the journal's recorded calls stand); the
// failed attempt's usage still counts.
func (m *Machine) retryStep(t *Turn, r StepResult) bool {
	if r.Error == "" || r.Fatal || !RetryableCode(r.Code) {
		return false
	}
	ran := 1 // the attempts of this step so far
	if p := m.retryOf(t); p != nil {
		ran = p.Attempt
	}
	if ran > m.cfg.Retry.Retries {
		return false
	}
	m.addUsage(t, r.Usage)
	step := t.Steps + 1
	m.retry = &retrying{turnID: t.ID, step: step, next: StepRetry{Attempt: ran + 1, After: m.cfg.Retry.Delay(ran), Code: r.Code}}
	m.emit(wire.TurnStepRetried{TurnID: t.ID, Step: uint64(step), Attempt: uint64(ran + 1), Code: r.Code})
	return true
}

// retryOf is the retry of t's next step, if that step runs again.
func (m *Machine) retryOf(t *Turn) *StepRetry {
	p := m.retry
	if p == nil || t == nil || p.turnID != t.ID || p.step != t.Steps+1 {
		return nil
	}
	r := p.next
	return &r
}
