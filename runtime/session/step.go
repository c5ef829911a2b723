package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/baton-rt/baton/internal/stages"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// runStep runs the agent's step in its own goroutine with a cancellable
// context; its result comes back through s.steps, checked (runtime.Checker)
// before the machine folds it. Whatever the agent does costs at most this
// step: a panic is recovered (agent_panic), a step past the step timeout
// fails (step_timeout) whether or not it returns, and an invalid result
// fails with its code. A result that comes after the timeout is discarded.
//
// The step streams through its own streamer (live.go): a step the boot
// found in flight is re-run after message.discarded, and a step whose
// result will not be committed ends with one.
func (s *Session) runStep(ctx context.Context, r runtime.RunStep) {
	stages.Mark(s.id, "step.dispatched")
	stepCtx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	rerun := s.bootDue != "" && s.bootDue == r.Input.Key()
	s.bootDue = ""
	// A retry replays the journal of the attempts before it, as a re-run
	// at boot does; its streamer is new (the failed attempt's live output
	// ended with message.discarded).
	live, jl := newStreamer(s.env, s.id, r.Input), newJournal(s.env, s.log, s.id, r.Input, rerun || r.Retry != nil)
	if jl != nil {
		s.journals[r.Input.Key()] = jl
	}
	// What the step's goroutine needs of the session, copied here on the
	// loop: the machine is the loop's alone.
	run := stepRun{env: s.env, log: s.log, in: r.Input, open: openHandles(s.m.Handles()), tags: s.m.Tags()}
	if r.Retry != nil {
		s.retrying(r)
	}
	go func() {
		defer cancel()
		if rerun {
			live.discard()
		}
		if r.Retry != nil && sleep(stepCtx, r.Retry.After) != nil {
			// Cancelled in the backoff: the machine discards the result
			// (the interrupt that cancelled it waits in its queue), or
			// the session is stopping.
			s.deliverStep(ctx, runtime.StepDone{TurnID: r.Input.TurnID, Step: r.Input.Step,
				Result: runtime.Failed("", errors.New("cancelled before the retry started"))})
			return
		}
		began := time.Now()
		sctx := runtime.WithLogger(stepCtx, s.log.With("turn", r.Input.TurnID, "step", r.Input.Step))
		if live != nil {
			sctx = runtime.WithSink(sctx, live)
		}
		if jl != nil {
			sctx = runtime.WithJournal(sctx, jl)
		}
		d := jl.outcome(run.exec(sctx))
		live.finish(d.Result.Error != "" || stepCtx.Err() != nil)
		s.env.Observer.StepDone(d, time.Since(began))
		s.deliverStep(ctx, d)
	}()
}

// deliverStep hands a step's result to the session loop, unless the
// session stopped.
func (s *Session) deliverStep(ctx context.Context, d runtime.StepDone) {
	select {
	case s.steps <- d:
	case <-ctx.Done():
	}
}

// retrying logs and counts a step that runs again.
func (s *Session) retrying(r runtime.RunStep) {
	s.env.Observer.StepRetried(r.Retry.Code)
	s.log.Warn("step failed for a reason outside the agent's control; it runs again",
		"turn", r.Input.TurnID, "step", r.Input.Step, "code", r.Retry.Code,
		"attempt", r.Retry.Attempt, "after", r.Retry.After.String())
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stepRun is one step of the agent as its own goroutine runs it, with
// what it needs of the session copied on the session loop at its start.
type stepRun struct {
	env  *Env
	log  *slog.Logger
	in   runtime.StepInput
	open map[string]bool   // the handles the session held open (parked or active)
	tags map[string]string // the session's tags when the step started (a new child's by default)
}

// openHandles are the names of the open handles among hs: a delegation to
// one goes to an existing child.
func openHandles(hs []runtime.Handle) map[string]bool {
	var open map[string]bool
	for _, h := range hs {
		if open == nil {
			open = map[string]bool{}
		}
		if h.State != wire.HandleClosed {
			open[h.Handle] = true
		}
	}
	return open
}

// exec runs the step under the step timeout and checks its result.
func (r stepRun) exec(ctx context.Context) runtime.StepDone {
	in := r.in
	deadline := time.Now().Add(r.timeout())
	tctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	res := make(chan runtime.StepDone, 1)
	go func() {
		d, perr := runtime.Run(tctx, r.env.Agent, in)
		if perr != nil {
			r.log.Error("agent panicked in a step; the step fails", "turn", in.TurnID, "step", in.Step,
				"panic", fmt.Sprint(perr.Value), "stack", string(perr.Stack))
		}
		res <- d
	}()
	d, ok := awaitStep(ctx, tctx, res, deadline)
	if !ok || ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded) {
		return r.timedOut()
	}
	d.Result = r.checkDelegation(ctx, r.env.Checker.Check(d.Result))
	r.env.Observer.StepFailed(d.Result.Code)
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
func (r stepRun) timedOut() runtime.StepDone {
	in := r.in
	r.log.Warn("step timed out; it fails", "turn", in.TurnID, "step", in.Step, "timeout", r.timeout().String())
	r.env.Observer.StepFailed(runtime.CodeStepTimeout)
	err := fmt.Errorf("step %s ran past the step timeout (%v)", in.Key(), r.timeout())
	return runtime.StepDone{TurnID: in.TurnID, Step: in.Step, Result: runtime.Failed(runtime.CodeStepTimeout, err)}
}

// noStepTimeout stands for "no step timeout" (Env.StepTimeout 0).
const noStepTimeout = 100 * 365 * 24 * time.Hour

func (r stepRun) timeout() time.Duration {
	if r.env.StepTimeout <= 0 {
		return noStepTimeout
	}
	return r.env.StepTimeout
}

// checkDelegation fails a step that delegates to another deployment whose
// owners do not read the inbox version child commands need, or, for a new
// child with tags, the version of tags (child_unsupported): a command it
// could not decode would be lost, and tags it does not read dropped; or to
// a retired deployment (child_unavailable): no owner of it takes new
// sessions.
func (r stepRun) checkDelegation(ctx context.Context, res runtime.StepResult) runtime.StepResult {
	d := res.Delegate
	if res.Error != "" || d == nil || d.DeploymentID == "" || d.DeploymentID == r.env.Deployment {
		return res
	}
	retired, err := false, error(nil)
	if !r.open[d.Handle] { // an open handle's child exists: it is adopted elsewhere
		retired, err = r.env.Sends.Retired(ctx, d.DeploymentID)
	}
	switch {
	case err != nil:
		return runtime.Failed(runtime.CodeChildUnavailable, fmt.Errorf("delegate: deployment %s: %w", d.DeploymentID, err))
	case retired:
		return runtime.Failed(runtime.CodeChildUnavailable, fmt.Errorf("delegate: deployment %s is retired", d.DeploymentID))
	}
	need, what := wire.StoredCommandVersion, "child commands"
	if !r.open[d.Handle] && len(d.ChildTags(r.tags)) > 0 {
		need, what = wire.TagsVersion, "tags"
	}
	ok, err := r.env.Sends.ReadsInbox(ctx, d.DeploymentID, need)
	switch {
	case err != nil:
		return runtime.Failed(runtime.CodeChildUnsupported, fmt.Errorf("delegate: deployment %s: %w", d.DeploymentID, err))
	case !ok:
		return runtime.Failed(runtime.CodeChildUnsupported,
			fmt.Errorf("delegate: deployment %s does not read inbox version %d (%s)", d.DeploymentID, need, what))
	}
	return res
}
