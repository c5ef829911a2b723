package pool

import (
	"slices"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// Step retries end to end (Config.StepRetry) with the demo agent's /flaky,
// /panic and /fail on a real embedded server: which failures run again,
// what the stream records of it, how often the agent really ran the step
// (the env's exec log), and a cancel during a retry's backoff.

// retrying sets the owner's step retry policy.
func retrying(retries int, backoff ...time.Duration) func(*Config) {
	return func(c *Config) { c.StepRetry = runtime.RetryPolicy{Retries: retries, Backoff: backoff} }
}

// turnEvents is the events of turn turnID: from its turn.started to its
// turn.completed or turn.cancelled, both included.
func turnEvents(t *testing.T, evs []wire.Event, turnID string) []wire.Event {
	t.Helper()
	of := func(kinds ...string) func(wire.Event) bool {
		return func(ev wire.Event) bool {
			if !slices.Contains(kinds, ev.Kind) {
				return false
			}
			d, err := harness.All[struct {
				TurnID string `json:"turnId"`
			}]([]wire.Event{ev}, ev.Kind)
			return err == nil && len(d) == 1 && d[0].TurnID == turnID
		}
	}
	from := slices.IndexFunc(evs, of(wire.EventTurnStarted))
	if from < 0 {
		t.Fatalf("no turn.started of %s: %s", turnID, harness.Kinds(evs))
	}
	n := slices.IndexFunc(evs[from:], of(wire.EventTurnCompleted, wire.EventTurnCancelled))
	if n < 0 {
		t.Fatalf("turn %s did not end: %s", turnID, harness.Kinds(evs[from:]))
	}
	return evs[from : from+n+1]
}

// inOrder fails the test unless each predicate first matches an event of
// evs after the event the one before it first matched.
func inOrder(t *testing.T, evs []wire.Event, what string, preds ...func(wire.Event) bool) {
	t.Helper()
	last := -1
	for i, p := range preds {
		at := slices.IndexFunc(evs, p)
		if at < 0 || at <= last {
			t.Fatalf("%s: event %d of the order is at %d, after %d: %s", what, i, at, last, harness.Kinds(evs))
		}
		last = at
	}
}

// stopReason is the stop reason of the turn's turn.completed.
func stopReason(t *testing.T, turn []wire.Event) string {
	t.Helper()
	return harness.FirstData[wire.TurnCompletedV3](t, turn, wire.EventTurnCompleted).StopReason
}

// wantRuns fails the test unless the agent ran step key of session id
// exactly want times (the env's exec log).
func (e *env) wantRuns(id, key string, want int) {
	e.t.Helper()
	if n := e.log.Count(id, key); n != want {
		e.t.Fatalf("step %s ran %d times, want %d; log %+v", key, n, want, e.log.Entries())
	}
}

// answered sends a plain delivery and waits until its turn completed: the
// session is not stuck, and every step before it has settled.
func (e *env) answered(id, text string, turns int) []wire.Event {
	e.t.Helper()
	e.Send(id, harness.Deliver(text))
	e.WaitOutput(id, text)
	evs := e.WaitKind(id, wire.EventTurnCompleted, turns)
	e.CheckStream(evs)
	return evs
}

// A step that fails once with a retryable error runs again after the
// backoff and succeeds: one turn.step_retried (attempt 2), then the
// output and turn.completed done, no error; the agent ran it twice and
// the owner counted one retry.
func TestFlakyStepRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	e.owner("v1", "p1", retrying(2, 50*time.Millisecond), func(c *Config) { c.Registerer = reg })
	id := e.Start("v1").SessionID

	e.Send(id, harness.Deliver("/flaky 1"))
	evs := e.WaitKind(id, wire.EventTurnCompleted, 1)
	e.CheckStream(evs)
	turn := turnEvents(t, evs, "t1")
	retries := harness.AllData[wire.TurnStepRetried](t, evs, wire.EventTurnStepRetried)
	want := []wire.TurnStepRetried{{TurnID: "t1", Step: 1, Attempt: 2, Code: wire.CodeAgentRetryable}}
	if !slices.Equal(retries, want) {
		t.Fatalf("turn.step_retried %+v, want %+v", retries, want)
	}
	if n := harness.Count(evs, wire.EventErrorKind); n != 0 {
		t.Fatalf("%d error events: %s", n, harness.Kinds(evs))
	}
	if got := harness.Outputs(evs); !slices.Equal(got, []string{"/flaky 1"}) {
		t.Fatalf("outputs %q", got)
	}
	inOrder(t, turn, "retried, output, completed", harness.IsKind(wire.EventTurnStepRetried),
		harness.IsOutput("/flaky 1"), harness.IsKind(wire.EventTurnCompleted))
	if r := stopReason(t, turn); r != "done" {
		t.Fatalf("stop reason %q, want done", r)
	}
	if got := e.StepKeys(evs); !slices.Equal(got, []string{"t1/1"}) {
		t.Fatalf("steps %q", got)
	}
	e.wantRuns(id, "t1/1", 2)
	metric := `baton_owner_step_retries_total{code="agent_retryable"}`
	if got := gather(t, reg); got[metric] != 1 {
		t.Fatalf("%s = %v, want 1; all %v", metric, got[metric], got)
	}
}

// A step that fails more often than the policy retries it runs Retries+1
// times: turn.step_retried attempt 2 and 3, then the last failure's error
// (agent_retryable) ends the turn with stop reason error.
func TestFlakyBeyondRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1", retrying(2, 10*time.Millisecond))
	id := e.Start("v1").SessionID

	e.Send(id, harness.Deliver("/flaky 5"))
	evs := e.WaitKind(id, wire.EventTurnCompleted, 1)
	e.CheckStream(evs)
	turn := turnEvents(t, evs, "t1")
	retries := harness.AllData[wire.TurnStepRetried](t, evs, wire.EventTurnStepRetried)
	want := []wire.TurnStepRetried{
		{TurnID: "t1", Step: 1, Attempt: 2, Code: wire.CodeAgentRetryable},
		{TurnID: "t1", Step: 1, Attempt: 3, Code: wire.CodeAgentRetryable},
	}
	if !slices.Equal(retries, want) {
		t.Fatalf("turn.step_retried %+v, want %+v", retries, want)
	}
	errs := harness.AllData[wire.ErrorData](t, evs, wire.EventErrorKind)
	if len(errs) != 1 || errs[0].Code != wire.CodeAgentRetryable || errs[0].TurnID != "t1" || errs[0].Step != 1 {
		t.Fatalf("errors %+v, want one agent_retryable of t1/1", errs)
	}
	if got := harness.Outputs(evs); len(got) != 0 {
		t.Fatalf("failed step's output kept: %q", got)
	}
	lastRetry := func(ev wire.Event) bool {
		d, err := harness.All[wire.TurnStepRetried]([]wire.Event{ev}, wire.EventTurnStepRetried)
		return err == nil && len(d) == 1 && d[0].Attempt == 3
	}
	inOrder(t, turn, "retried, retried, error, completed", harness.IsKind(wire.EventTurnStepRetried),
		lastRetry, harness.IsKind(wire.EventErrorKind), harness.IsKind(wire.EventTurnCompleted))
	if r := stopReason(t, turn); r != "error" {
		t.Fatalf("stop reason %q, want error", r)
	}
	e.wantRuns(id, "t1/1", 3)

	// Nothing runs the failed step again later.
	evs = e.answered(id, "after", 2)
	wantRetried(t, evs, 2)
	e.wantRuns(id, "t1/1", 3)
}

// A panic (agent_panic) and an agent's own error (no code) are never
// retried, whatever the policy: one error each, no turn.step_retried, the
// step ran once.
func TestPanicNotRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1", retrying(2, 10*time.Millisecond))
	id := e.Start("v1").SessionID

	for i, c := range []struct{ text, turn, code string }{
		{"/panic", "t1", wire.CodeAgentPanic},
		{"/fail", "t2", ""},
	} {
		e.Send(id, harness.Deliver(c.text))
		evs := e.WaitKind(id, wire.EventTurnCompleted, i+1)
		e.CheckStream(evs)
		turn := turnEvents(t, evs, c.turn)
		errs := harness.AllData[wire.ErrorData](t, turn, wire.EventErrorKind)
		if len(errs) != 1 || errs[0].Code != c.code || errs[0].TurnID != c.turn || errs[0].Step != 1 {
			t.Fatalf("%s: errors %+v, want one of %s/1 with code %q", c.text, errs, c.turn, c.code)
		}
		wantRetried(t, evs, 0)
		if r := stopReason(t, turn); r != "error" {
			t.Fatalf("%s: stop reason %q, want error", c.text, r)
		}
	}

	// The next turn settles after both; neither step ran again.
	evs := e.answered(id, "after", 3)
	wantRetried(t, evs, 0)
	e.wantRuns(id, "t1/1", 1)
	e.wantRuns(id, "t2/1", 1)
}

// A cancel during a retry's backoff cancels the turn at once: the step is
// interrupted, the turn cancelled, and the agent never runs the step
// again (the exec log is the proof, not a clock). The session then
// answers the next delivery.
func TestCancelDuringRetryBackoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A backoff far longer than the test: only the cancel ends it.
	e.owner("v1", "p1", retrying(2, 20*time.Second))
	id := e.Start("v1").SessionID

	e.Send(id, harness.Deliver("/flaky 1"))
	e.WaitKind(id, wire.EventTurnStepRetried, 1)
	e.Send(id, harness.WithID("cancel", harness.Control(wire.KindCancel)))
	evs := e.WaitKind(id, wire.EventTurnCancelled, 1)
	e.CheckStream(evs)
	if _, ok := harness.AppliedIDs(evs)["cancel"]; !ok {
		t.Fatalf("cancel not applied: %s", harness.Kinds(evs))
	}
	turn := turnEvents(t, evs, "t1")
	if tc := harness.FirstData[wire.TurnCancelled](t, turn, wire.EventTurnCancelled); tc.TurnID != "t1" {
		t.Fatalf("cancelled %+v", tc)
	}
	ints := harness.AllData[wire.StepInterrupted](t, evs, wire.EventStepInterrupted)
	if len(ints) != 1 || ints[0].TurnID != "t1" || ints[0].Step != 1 {
		t.Fatalf("step.interrupted %+v, want one of t1/1", ints)
	}
	inOrder(t, turn, "retried, interrupted, cancelled", harness.IsKind(wire.EventTurnStepRetried),
		harness.IsKind(wire.EventStepInterrupted), harness.IsKind(wire.EventTurnCancelled))
	for _, k := range []string{wire.EventTurnCompleted, wire.EventErrorKind, wire.EventTurnStep, wire.EventMessageOutput} {
		if n := harness.Count(evs, k); n != 0 {
			t.Fatalf("%d %s events in the cancelled turn: %s", n, k, harness.Kinds(evs))
		}
	}
	e.wantRuns(id, "t1/1", 1)

	// Not stuck: the next delivery is a new turn answered normally, and
	// the cancelled step still ran only once.
	evs = e.answered(id, "hello", 1)
	if got := e.StepKeys(evs); !slices.Equal(got, []string{"t2/1"}) {
		t.Fatalf("steps %q", got)
	}
	if r := stopReason(t, turnEvents(t, evs, "t2")); r != "done" {
		t.Fatalf("stop reason %q, want done", r)
	}
	wantRetried(t, evs, 1)
	e.wantRuns(id, "t1/1", 1)
	e.wantRuns(id, "t2/1", 1)
}

// A zero policy retries nothing: a retryable failure is the turn's error
// at once.
func TestZeroPolicyRetriesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1", func(c *Config) { c.StepRetry = runtime.RetryPolicy{} })
	id := e.Start("v1").SessionID

	e.Send(id, harness.Deliver("/flaky 1"))
	evs := e.WaitKind(id, wire.EventTurnCompleted, 1)
	e.CheckStream(evs)
	turn := turnEvents(t, evs, "t1")
	errs := harness.AllData[wire.ErrorData](t, evs, wire.EventErrorKind)
	if len(errs) != 1 || errs[0].Code != wire.CodeAgentRetryable || errs[0].TurnID != "t1" || errs[0].Step != 1 {
		t.Fatalf("errors %+v, want one agent_retryable of t1/1", errs)
	}
	wantRetried(t, evs, 0)
	if r := stopReason(t, turn); r != "error" {
		t.Fatalf("stop reason %q, want error", r)
	}

	evs = e.answered(id, "after", 2)
	wantRetried(t, evs, 0)
	e.wantRuns(id, "t1/1", 1)
}

// wantRetried fails unless evs hold n turn.step_retried events.
func wantRetried(t *testing.T, evs []wire.Event, n int) {
	t.Helper()
	if got := harness.Count(evs, wire.EventTurnStepRetried); got != n {
		t.Fatalf("%d turn.step_retried events, want %d: %s", got, n, harness.Kinds(evs))
	}
}
