package harness

import (
	"context"
	"sync"
)

// Runner runs one function in its own goroutine until it is cancelled: an
// in-process owner's Run, for example. Its one owner is whoever holds it;
// Stop waits for the goroutine.
type Runner struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	once   sync.Once
}

// Go starts run with a context that Cancel and Stop cancel.
func Go(run func(context.Context) error) *Runner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Runner{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = run(ctx)
	}()
	return r
}

// Cancel cancels the run's context without waiting.
func (r *Runner) Cancel() { r.cancel() }

// Done is closed when run has returned.
func (r *Runner) Done() <-chan struct{} { return r.done }

// Err is what run returned (nil while it runs).
func (r *Runner) Err() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

// Stop cancels the run, waits for it and returns what it returned; it is
// idempotent (a test's explicit stop and its cleanup).
func (r *Runner) Stop() error {
	r.once.Do(r.cancel)
	<-r.done
	return r.err
}
