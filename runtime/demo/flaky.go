package demo

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/baton-rt/baton/runtime"
)

// attempts counts the attempts of each step (session and step key) this
// process ran, for /flaky.
type attempts struct {
	mu sync.Mutex
	n  map[string]int
}

// next counts one more attempt of key and returns its number (1 first).
func (a *attempts) next(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == nil {
		a.n = map[string]int{}
	}
	a.n[key]++
	return a.n[key]
}

// flakyStep fails the step's first n attempts in this process (arg n,
// default 1) with an error marked runtime.Retryable (agent_retryable),
// so the owner's retry policy runs it again; the attempt after it
// succeeds with r.
func (a *Agent) flakyStep(in runtime.StepInput, arg string, r runtime.StepResult) (runtime.StepResult, error) {
	n, err := strconv.Atoi(arg)
	if err != nil || n < 0 {
		n = 1
	}
	if k := a.flaky.next(in.SessionID + "/" + in.Key()); k <= n {
		return runtime.StepResult{}, runtime.Retryable(fmt.Errorf("%w: attempt %d of step %s fails (of %d)", ErrFlaky, k, in.Key(), n))
	}
	return r, nil
}
