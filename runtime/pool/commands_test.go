package pool

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// Every command kind end to end with the demo agent, one session each, on a
// real embedded server.

// A steer sent while a /sleep step runs joins the same turn as the input of
// its next step; a queued delivery (and a steer of another caller) waits for
// its own turn.
func TestDeliverQueueAndSteer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.start("v1").SessionID

	e.send(id, deliver("/sleep 2s"))
	e.waitKind(id, wire.EventTurnStarted, 1)
	e.send(id, deliver("queued"))
	e.send(id, steer("steered"))
	other := steer("other caller")
	other.Caller = "bob"
	e.send(id, other)

	evs := e.waitKind(id, wire.EventTurnCompleted, 3)
	checkStream(t, evs)
	if got, want := outputs(evs), []string{"/sleep 2s", "steered", "queued", "other caller"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %q, want %q", got, want)
	}
	if got, want := stepKeys(t, evs), []string{"t1/1", "t1/2", "t2/1", "t3/1"}; !slices.Equal(got, want) {
		t.Fatalf("steps %q, want %q", got, want)
	}
	// The steer is an input of t1's second step: its output lies between
	// the two turn.step events of t1, inside the one turn t1.
	var steps []int
	for i, ev := range evs {
		if ev.Kind == wire.EventTurnStep {
			steps = append(steps, i)
		}
	}
	if at := index(evs, isOutput("steered")); at < steps[0] || at > steps[1] || index(evs[steps[0]:steps[1]], isKind(wire.EventTurnStarted)) >= 0 {
		t.Fatalf("steer not in t1's second step: %s", kinds(evs))
	}
	if n := count(evs, wire.EventTurnStarted); n != 3 {
		t.Fatalf("%d turns, want 3 (the steer must not start one)", n)
	}
	if n := count(evs, "demo.slept"); n != 1 {
		t.Fatalf("%d demo.slept events", n)
	}
	if callers := dataAll[wire.TurnStarted](t, evs, wire.EventTurnStarted); callers[2].Caller != "bob" {
		t.Fatalf("turns %+v", callers)
	}
}

// A cancel reaches a running /sleep 10s step at once; the turn is cancelled
// (the step rolled back) and the next delivery starts a new turn.
func TestCancelDuringStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.start("v1").SessionID

	e.send(id, deliver("/sleep 10s"))
	e.waitKind(id, wire.EventTurnStarted, 1)
	sent := time.Now()
	e.send(id, control(wire.KindCancel))
	evs := e.waitKind(id, wire.EventTurnCancelled, 1)
	if d := time.Since(sent); d > 5*time.Second {
		t.Fatalf("cancel took %s: it did not reach the running step", d)
	}
	if count(evs, wire.EventStepInterrupted) != 1 || count(evs, wire.EventTurnStep) != 0 || len(outputs(evs)) != 0 {
		t.Fatalf("interrupted step not rolled back: %s", kinds(evs))
	}
	if tc := data[wire.TurnCancelled](t, evs, wire.EventTurnCancelled); tc.TurnID != "t1" {
		t.Fatalf("cancelled %+v", tc)
	}

	e.send(id, deliver("after cancel"))
	e.waitOutput(id, "after cancel")
	evs = e.waitKind(id, wire.EventTurnCompleted, 1)
	checkStream(t, evs)
	if got := stepKeys(t, evs); !slices.Equal(got, []string{"t2/1"}) {
		t.Fatalf("steps %q", got)
	}
}

// reset cancels a running turn and forgets history; clear empties history;
// compact replaces it with one summary entry.
func TestResetClearCompact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.start("v1").SessionID

	e.send(id, deliver("one"))
	e.waitOutput(id, "one")
	e.send(id, deliver("/sleep 10s"))
	e.waitKind(id, wire.EventTurnStarted, 2)
	sent := time.Now()
	e.send(id, withID("reset", control(wire.KindReset)))
	evs := e.waitKind(id, wire.EventTurnCancelled, 1)
	if d := time.Since(sent); d > 5*time.Second {
		t.Fatalf("reset took %s", d)
	}
	if count(evs, wire.EventStepInterrupted) != 1 {
		t.Fatalf("reset did not interrupt the step: %s", kinds(evs))
	}
	if _, snap := e.session(id); len(snap.History) != 0 || snap.Turn != nil {
		t.Fatalf("after reset: history %+v turn %+v", snap.History, snap.Turn)
	}

	e.send(id, deliver("two"))
	e.send(id, withID("clear", control(wire.KindClear)))
	e.waitApplied(id, "clear")
	if _, snap := e.session(id); len(snap.History) != 0 {
		t.Fatalf("after clear: history %+v", snap.History)
	}

	e.send(id, deliver("three"))
	e.send(id, deliver("four"))
	e.send(id, withID("compact", control(wire.KindCompact)))
	evs = e.waitApplied(id, "compact")
	_, snap := e.session(id)
	if len(snap.History) != 1 || snap.History[0].Role != "summary" || snap.History[0].Text != "4 entries compacted" {
		t.Fatalf("after compact: history %+v", snap.History)
	}
	checkStream(t, evs)
	if got := outputs(evs); !slices.Equal(got, []string{"one", "two", "three", "four"}) {
		t.Fatalf("outputs %q", got)
	}
}

// /ask parks the turn; a stale input.response is applied and dropped, the
// matching one (requestId from input.requested) resumes the turn.
func TestInputResponse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.start("v1").SessionID

	e.send(id, deliver("/ask what colour?"))
	evs := e.waitKind(id, wire.EventInputRequested, 1)
	req := data[wire.InputRequested](t, evs, wire.EventInputRequested)
	if req.Question != "what colour?" || req.RequestID == "" {
		t.Fatalf("input.requested %+v", req)
	}
	e.send(id, withID("stale", inputResponse("no-such-request", `"red"`)))
	e.waitApplied(id, "stale")
	e.send(id, inputResponse(req.RequestID, `"blue"`))
	want := "input " + req.RequestID + `: "blue"`
	evs = e.waitOutput(id, want)
	evs = e.waitKind(id, wire.EventTurnCompleted, 1)
	checkStream(t, evs)
	if got := outputs(evs); !slices.Equal(got, []string{"/ask what colour?", want}) {
		t.Fatalf("outputs %q", got)
	}
	if got := stepKeys(t, evs); !slices.Equal(got, []string{"t1/1", "t1/2"}) {
		t.Fatalf("steps %q", got)
	}
}

// /authorize parks the turn; the auth.callback for the attempt resumes it.
func TestAuthCallback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.start("v1").SessionID

	e.send(id, deliver("/authorize"))
	evs := e.waitKind(id, wire.EventAuthRequested, 1)
	att := data[wire.AuthRequested](t, evs, wire.EventAuthRequested)
	e.send(id, withID("stale", authCallback("old-attempt", wire.AuthGranted)))
	e.waitApplied(id, "stale")
	e.send(id, authCallback(att.AttemptID, wire.AuthGranted))
	want := "authorization " + att.AttemptID + ": granted"
	e.waitOutput(id, want)
	evs = e.waitKind(id, wire.EventTurnCompleted, 1)
	checkStream(t, evs)
	if got := outputs(evs); !slices.Equal(got, []string{"/authorize", want}) {
		t.Fatalf("outputs %q", got)
	}
}

// A task.result published for the task of task.started settles it; the
// owner's durable task runner delivers a short task's result by itself.
func TestTaskResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.start("v1").SessionID

	// A long task: the runner will not finish it; the result comes from us.
	e.send(id, deliver("/task 1h"))
	evs := e.waitKind(id, wire.EventTaskStarted, 1)
	long := data[wire.TaskStarted](t, evs, wire.EventTaskStarted).TaskID
	e.send(id, withID("unknown", taskResult("no-such-task", `{}`)))
	e.send(id, withID("result", taskResult(long, `{"ok":true}`)))
	evs = e.waitKind(id, wire.EventTaskCompleted, 1)
	if tc := data[wire.TaskCompleted](t, evs, wire.EventTaskCompleted); tc.TaskID != long || tc.Error != "" {
		t.Fatalf("task.completed %+v", tc)
	}
	if _, ok := appliedIDs(evs)["unknown"]; !ok {
		t.Fatal("result for an unknown task not applied")
	}

	// A short task: the built-in runner reports it through the inbox.
	e.send(id, deliver("/task 200ms"))
	evs = e.waitKind(id, wire.EventTaskStarted, 2)
	short := dataAll[wire.TaskStarted](t, evs, wire.EventTaskStarted)[1].TaskID
	evs = e.waitKind(id, wire.EventTaskCompleted, 2)
	if tc := dataAll[wire.TaskCompleted](t, evs, wire.EventTaskCompleted)[1]; tc.TaskID != short {
		t.Fatalf("task.completed %+v, want %s", tc, short)
	}
	applied := checkStream(t, evs)
	if _, ok := applied["task-"+id+"-"+short]; !ok {
		t.Fatalf("runner's task.result not applied: %v", applied)
	}
	if _, snap := e.session(id); len(snap.Waits.Tasks) != 0 {
		t.Fatalf("tasks still live: %+v", snap.Waits.Tasks)
	}
	e.send(id, deliver("still here"))
	checkStream(t, e.waitOutput(id, "still here"))
}

// A timeout whose timer ID is stale is applied and ignored; the one that
// carries the checkpoint's timer ID ends the session (expired).
func TestTimeoutCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.startWith(protocol.StartRequest{DeploymentID: "v1", Timeout: "1h"}).SessionID
	e.waitKind(id, wire.EventSessionStarted, 1)
	_, snap := e.session(id)
	if snap.Timer == nil || snap.Timer.ID == "" || snap.Timer.Duration != time.Hour {
		t.Fatalf("timer %+v", snap.Timer)
	}

	e.send(id, withID("stale", timeout("stale-"+snap.Timer.ID)))
	e.waitApplied(id, "stale")
	e.send(id, deliver("alive"))
	evs := e.waitOutput(id, "alive")
	if count(evs, wire.EventSessionEnded) != 0 {
		t.Fatalf("a stale timer ended the session: %s", kinds(evs))
	}

	e.send(id, withID("expire", timeout(snap.Timer.ID)))
	evs = e.waitKind(id, wire.EventSessionEnded, 1)
	checkStream(t, evs)
	if end := data[wire.SessionEnded](t, evs, wire.EventSessionEnded); end.Reason != wire.EndExpired {
		t.Fatalf("ended %+v", end)
	}
	if evs[len(evs)-1].Kind != wire.EventSessionEnded {
		t.Fatalf("session.ended is not the last event: %s", kinds(evs))
	}
	e.waitEnded(id)
}

// A session started with a short timeout is ended by the server-fired
// message schedule, with nobody publishing a timeout.
func TestTimeoutFiredByServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.startWith(protocol.StartRequest{DeploymentID: "v1", Timeout: "1s"}).SessionID
	e.send(id, deliver("hello"))
	evs := e.waitKind(id, wire.EventSessionEnded, 1)
	checkStream(t, evs)
	if end := data[wire.SessionEnded](t, evs, wire.EventSessionEnded); end.Reason != wire.EndExpired {
		t.Fatalf("ended %+v", end)
	}
	e.waitEnded(id)
}

// No step runs while paused; immediate commands still apply; resume admits
// the queued delivery.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.start("v1").SessionID

	e.send(id, withID("pause", control(wire.KindPause)))
	e.waitKind(id, wire.EventSessionPaused, 1)
	e.send(id, withID("held", deliver("held")))
	// A later immediate command proves the delivery was received: the
	// consumer delivers in stream order.
	e.send(id, withID("pause-again", control(wire.KindPause)))
	evs := e.waitApplied(id, "pause-again")
	if _, ok := appliedIDs(evs)["held"]; ok || count(evs, wire.EventTurnStarted) != 0 || len(e.log.Entries()) != 0 {
		t.Fatalf("a delivery was admitted while paused: %s", kinds(evs))
	}
	if count(evs, wire.EventSessionPaused) != 1 {
		t.Fatalf("a repeated pause recorded again: %s", kinds(evs))
	}
	if cur, _ := e.session(id); cur.Record.State != "paused" {
		t.Fatalf("record state %q", cur.Record.State)
	}

	e.send(id, withID("resume", control(wire.KindResume)))
	evs = e.waitOutput(id, "held")
	checkStream(t, evs)
	resumed, started := index(evs, isKind(wire.EventSessionResumed)), index(evs, isKind(wire.EventTurnStarted))
	if resumed < 0 || started < resumed {
		t.Fatalf("turn started before resume: %s", kinds(evs))
	}
}

// A move to another deployment asks for a handoff; no handoff executor is
// configured (Config.DisableHandoff), so the owner keeps the session, applies the move once and
// keeps working. A move while busy records handoff.skipped before it.
func TestMoveWithoutExecutor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1", func(c *Config) { c.DisableHandoff = true })
	id := e.start("v1").SessionID
	e.waitKind(id, wire.EventSessionStarted, 1)

	e.send(id, withID("move-idle", move("v2")))
	e.send(id, deliver("after move"))
	e.waitOutput(id, "after move")

	e.send(id, deliver("/sleep 1s"))
	e.waitKind(id, wire.EventTurnStarted, 2)
	e.send(id, withID("move-busy", move("v2")))
	e.send(id, deliver("after busy move"))
	evs := e.waitOutput(id, "after busy move")
	applied := checkStream(t, evs)
	for _, c := range []string{"move-idle", "move-busy"} {
		if _, ok := applied[c]; !ok {
			t.Fatalf("%s not applied", c)
		}
	}
	skips := dataAll[wire.HandoffSkipped](t, evs, wire.EventHandoffSkipped)
	if len(skips) != 1 || skips[0].CommandID != "move-busy" || skips[0].Reason != wire.SkipBusy || skips[0].TargetDeploymentID != "v2" {
		t.Fatalf("handoff.skipped %+v", skips)
	}
	if cur, _ := e.session(id); cur.Record.DeploymentID != "v1" || cur.Record.Epoch != 1 {
		t.Fatalf("record moved: %+v", cur.Record)
	}
}

// /fail records an error and ends the turn; the session continues.
func TestFailedStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.start("v1").SessionID

	e.send(id, deliver("/fail"))
	evs := e.waitKind(id, wire.EventErrorKind, 1)
	if len(outputs(evs)) != 0 {
		t.Fatalf("failed step's output kept: %q", outputs(evs))
	}
	e.send(id, deliver("recovered"))
	e.waitOutput(id, "recovered")
	evs = e.waitKind(id, wire.EventTurnCompleted, 2)
	checkStream(t, evs)
	if count(evs, wire.EventTurnCompleted) != 2 || count(evs, wire.EventSessionEnded) != 0 {
		t.Fatalf("events %s", kinds(evs))
	}
}

// /done finalizes: session.ended done last, every address tombstoned, the
// consumer deleted, the record ended.
func TestDone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.start("v1", "done-alias").SessionID

	e.send("done-alias", deliver("/done"))
	evs := e.waitKind(id, wire.EventSessionEnded, 1)
	checkStream(t, evs)
	if end := data[wire.SessionEnded](t, evs, wire.EventSessionEnded); end.Reason != wire.EndDone {
		t.Fatalf("ended %+v", end)
	}
	if evs[len(evs)-1].Kind != wire.EventSessionEnded {
		t.Fatalf("session.ended is not last: %s", kinds(evs))
	}
	e.waitEnded(id, "done-alias")
}

// /alias claims an address for the live session; deliveries to it reach it.
func TestAliasDirective(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.start("v1").SessionID

	e.send(id, deliver("/alias thread-42"))
	e.eventually(wait, "hook thread-42", func() bool { _, ok := e.hook("thread-42"); return ok })
	if h, _ := e.hook("thread-42"); h.SessionID != id || h.Tombstone {
		t.Fatalf("hook %+v", h)
	}
	e.send("thread-42", deliver("via alias"))
	evs := e.waitOutput(id, "via alias")
	checkStream(t, evs)
	if _, snap := e.session(id); !slices.Equal(snap.Aliases, []string{"thread-42"}) {
		t.Fatalf("aliases %q", snap.Aliases)
	}
}

// waitEnded waits for the clean-up of an ended session: record ended, every
// address tombstoned, the consumer gone, the owner no longer running it.
func (e *env) waitEnded(id string, aliases ...string) {
	e.t.Helper()
	addrs := append([]string{id}, aliases...)
	cur, _ := e.session(id)
	e.eventually(wait, "clean-up of "+id, func() bool {
		for _, a := range addrs {
			if h, ok := e.hook(a); !ok || !h.Tombstone {
				return false
			}
		}
		ids, err := e.store.ListIndex(e.t.Context(), "p1")
		return (err == nil || errors.Is(err, record.ErrNotFound)) && !slices.Contains(ids, id) && !e.consumerExists(cur.Record.Consumer)
	})
	if cur.Record.State != "ended" {
		e.t.Fatalf("record state %q", cur.Record.State)
	}
}
