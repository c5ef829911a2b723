package pool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-rt/baton/runtime"
)

// runStep runs the agent's step in its own goroutine with a cancellable
// context; its result comes back through s.steps, checked (runtime.Checker)
// before the machine folds it. Whatever the agent does costs at most this
// step: a panic is recovered (agent_panic), a step past the step timeout
// fails (step_timeout) whether or not it returns, and an invalid result
// fails with its code. A result that comes after the timeout is discarded.
func (s *session) runStep(ctx context.Context, r runtime.RunStep) {
	stepCtx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	go func() {
		defer cancel()
		began := time.Now()
		d := s.o.execStep(stepCtx, s, r.Input)
		s.o.metrics.stepDone(d, time.Since(began))
		select {
		case s.steps <- d:
		case <-ctx.Done():
		}
	}()
}

// execStep runs one step under the step timeout and checks its result.
func (o *Owner) execStep(ctx context.Context, s *session, in runtime.StepInput) runtime.StepDone {
	deadline := time.Now().Add(o.cfg.StepTimeout)
	tctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	res := make(chan runtime.StepDone, 1)
	go func() {
		d, perr := runtime.Run(tctx, o.cfg.Agent, in)
		if perr != nil {
			s.log.Error("agent panicked in a step; the step fails", "turn", in.TurnID, "step", in.Step,
				"panic", fmt.Sprint(perr.Value), "stack", string(perr.Stack))
		}
		res <- d
	}()
	d, ok := awaitStep(ctx, tctx, res, deadline)
	if !ok || ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
		return o.timedOut(s, in)
	}
	d.Result = o.checker.Check(d.Result)
	o.metrics.stepFailed(d.Result.Code)
	return d
}

// awaitStep waits for the step's result. A step whose context was cancelled
// (a cancel command, shutdown) is still given until the deadline to return;
// one that has not returned by the deadline is abandoned (ok false).
func awaitStep(ctx, tctx context.Context, res <-chan runtime.StepDone, deadline time.Time) (runtime.StepDone, bool) {
	select {
	case d := <-res:
		return d, true
	case <-tctx.Done():
	}
	if ctx.Err() == nil {
		return runtime.StepDone{}, false // the deadline passed
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case d := <-res:
		return d, true
	case <-t.C:
		return runtime.StepDone{}, false
	}
}

// timedOut is the failed step of a step past the step timeout.
func (o *Owner) timedOut(s *session, in runtime.StepInput) runtime.StepDone {
	s.log.Warn("step timed out; it fails", "turn", in.TurnID, "step", in.Step, "timeout", o.cfg.StepTimeout.String())
	o.metrics.stepFailed(runtime.CodeStepTimeout)
	err := fmt.Errorf("step %s ran past the step timeout (%v)", in.Key(), o.cfg.StepTimeout)
	return runtime.StepDone{TurnID: in.TurnID, Step: in.Step, Result: runtime.Failed(runtime.CodeStepTimeout, err)}
}
