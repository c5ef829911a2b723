package pool

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
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
	id := e.Start("v1").SessionID

	e.Send(id, harness.Deliver("/sleep 2s"))
	e.WaitKind(id, wire.EventTurnStarted, 1)
	e.Send(id, harness.Deliver("queued"))
	e.Send(id, harness.Steer("steered"))
	other := harness.Steer("other caller")
	other.Caller = "bob"
	e.Send(id, other)

	evs := e.WaitKind(id, wire.EventTurnCompleted, 3)
	e.CheckStream(evs)
	if got, want := harness.Outputs(evs), []string{"/sleep 2s", "steered", "queued", "other caller"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %q, want %q", got, want)
	}
	if got, want := e.StepKeys(evs), []string{"t1/1", "t1/2", "t2/1", "t3/1"}; !slices.Equal(got, want) {
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
	if at := slices.IndexFunc(evs, harness.IsOutput("steered")); at < steps[0] || at > steps[1] || slices.IndexFunc(evs[steps[0]:steps[1]], harness.IsKind(wire.EventTurnStarted)) >= 0 {
		t.Fatalf("steer not in t1's second step: %s", harness.Kinds(evs))
	}
	if n := harness.Count(evs, wire.EventTurnStarted); n != 3 {
		t.Fatalf("%d turns, want 3 (the steer must not start one)", n)
	}
	if n := harness.Count(evs, "demo.slept"); n != 1 {
		t.Fatalf("%d demo.slept events", n)
	}
	if callers := harness.AllData[wire.TurnStarted](t, evs, wire.EventTurnStarted); callers[2].Caller != "bob" {
		t.Fatalf("turns %+v", callers)
	}
}

// A cancel reaches a running /sleep 10s step at once; the turn is cancelled
// (the step rolled back) and the next delivery starts a new turn.
func TestCancelDuringStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.Start("v1").SessionID

	e.Send(id, harness.Deliver("/sleep 10s"))
	e.WaitKind(id, wire.EventTurnStarted, 1)
	sent := time.Now()
	e.Send(id, harness.Control(wire.KindCancel))
	evs := e.WaitKind(id, wire.EventTurnCancelled, 1)
	if d := time.Since(sent); d > 5*time.Second {
		t.Fatalf("cancel took %s: it did not reach the running step", d)
	}
	if harness.Count(evs, wire.EventStepInterrupted) != 1 || harness.Count(evs, wire.EventTurnStep) != 0 || len(harness.Outputs(evs)) != 0 {
		t.Fatalf("interrupted step not rolled back: %s", harness.Kinds(evs))
	}
	if tc := harness.FirstData[wire.TurnCancelled](t, evs, wire.EventTurnCancelled); tc.TurnID != "t1" {
		t.Fatalf("cancelled %+v", tc)
	}

	e.Send(id, harness.Deliver("after cancel"))
	e.WaitOutput(id, "after cancel")
	evs = e.WaitKind(id, wire.EventTurnCompleted, 1)
	e.CheckStream(evs)
	if got := e.StepKeys(evs); !slices.Equal(got, []string{"t2/1"}) {
		t.Fatalf("steps %q", got)
	}
}

// reset cancels a running turn and forgets history; clear empties history;
// compact replaces it with one summary entry.
func TestResetClearCompact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.Start("v1").SessionID

	e.Send(id, harness.Deliver("one"))
	e.WaitOutput(id, "one")
	e.Send(id, harness.Deliver("/sleep 10s"))
	e.WaitKind(id, wire.EventTurnStarted, 2)
	sent := time.Now()
	e.Send(id, harness.WithID("reset", harness.Control(wire.KindReset)))
	evs := e.WaitKind(id, wire.EventTurnCancelled, 1)
	if d := time.Since(sent); d > 5*time.Second {
		t.Fatalf("reset took %s", d)
	}
	if harness.Count(evs, wire.EventStepInterrupted) != 1 {
		t.Fatalf("reset did not interrupt the step: %s", harness.Kinds(evs))
	}
	if _, snap := e.session(id); len(snap.History) != 0 || snap.Turn != nil {
		t.Fatalf("after reset: history %+v turn %+v", snap.History, snap.Turn)
	}

	e.Send(id, harness.Deliver("two"))
	e.Send(id, harness.WithID("clear", harness.Control(wire.KindClear)))
	e.WaitApplied(id, "clear")
	if _, snap := e.session(id); len(snap.History) != 0 {
		t.Fatalf("after clear: history %+v", snap.History)
	}

	e.Send(id, harness.Deliver("three"))
	e.Send(id, harness.Deliver("four"))
	e.Send(id, harness.WithID("compact", harness.Control(wire.KindCompact)))
	evs = e.WaitApplied(id, "compact")
	_, snap := e.session(id)
	if len(snap.History) != 1 || snap.History[0].Role != runtime.RoleSystem || snap.History[0].Kind != runtime.EntrySummary || snap.History[0].Text() != "4 entries compacted" {
		t.Fatalf("after compact: history %+v", snap.History)
	}
	e.CheckStream(evs)
	if got := harness.Outputs(evs); !slices.Equal(got, []string{"one", "two", "three", "four"}) {
		t.Fatalf("outputs %q", got)
	}
}

// /ask parks the turn; a stale input.response is applied and dropped, the
// matching one (requestId from input.requested) resumes the turn.
func TestInputResponse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.Start("v1").SessionID

	e.Send(id, harness.Deliver("/ask what colour?"))
	evs := e.WaitKind(id, wire.EventInputRequested, 1)
	req := harness.FirstData[wire.InputRequested](t, evs, wire.EventInputRequested)
	if req.Question != "what colour?" || req.RequestID == "" {
		t.Fatalf("input.requested %+v", req)
	}
	e.Send(id, harness.WithID("stale", harness.InputResponse("no-such-request", `"red"`)))
	e.WaitApplied(id, "stale")
	e.Send(id, harness.InputResponse(req.RequestID, `"blue"`))
	want := "input " + req.RequestID + `: "blue"`
	e.WaitOutput(id, want)
	evs = e.WaitKind(id, wire.EventTurnCompleted, 1)
	e.CheckStream(evs)
	if got := harness.Outputs(evs); !slices.Equal(got, []string{"/ask what colour?", want}) {
		t.Fatalf("outputs %q", got)
	}
	if got := e.StepKeys(evs); !slices.Equal(got, []string{"t1/1", "t1/2"}) {
		t.Fatalf("steps %q", got)
	}
}

// /authorize parks the turn; the auth.callback for the attempt resumes it.
func TestAuthCallback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.Start("v1").SessionID

	e.Send(id, harness.Deliver("/authorize"))
	evs := e.WaitKind(id, wire.EventAuthRequested, 1)
	att := harness.FirstData[wire.AuthRequested](t, evs, wire.EventAuthRequested)
	e.Send(id, harness.WithID("stale", harness.AuthCallback("old-attempt", wire.AuthGranted)))
	e.WaitApplied(id, "stale")
	e.Send(id, harness.AuthCallback(att.AttemptID, wire.AuthGranted))
	want := "authorization " + att.AttemptID + ": granted"
	e.WaitOutput(id, want)
	evs = e.WaitKind(id, wire.EventTurnCompleted, 1)
	e.CheckStream(evs)
	if got := harness.Outputs(evs); !slices.Equal(got, []string{"/authorize", want}) {
		t.Fatalf("outputs %q", got)
	}
}

// A task.result published for the task of task.started settles it; the
// owner's durable task runner delivers a short task's result by itself.
func TestTaskResult(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.Start("v1").SessionID

	// A long task: the runner will not finish it; the result comes from us.
	e.Send(id, harness.Deliver("/task 1h"))
	evs := e.WaitKind(id, wire.EventTaskStarted, 1)
	long := harness.FirstData[wire.TaskStarted](t, evs, wire.EventTaskStarted).TaskID
	e.Send(id, harness.WithID("unknown", harness.TaskResult("no-such-task", `{}`)))
	e.Send(id, harness.WithID("result", harness.TaskResult(long, `{"ok":true}`)))
	evs = e.WaitKind(id, wire.EventTaskCompleted, 1)
	if tc := harness.FirstData[wire.TaskCompleted](t, evs, wire.EventTaskCompleted); tc.TaskID != long || tc.Error != "" {
		t.Fatalf("task.completed %+v", tc)
	}
	if _, ok := harness.AppliedIDs(evs)["unknown"]; !ok {
		t.Fatal("result for an unknown task not applied")
	}

	// A short task: the built-in runner reports it through the inbox.
	e.Send(id, harness.Deliver("/task 200ms"))
	evs = e.WaitKind(id, wire.EventTaskStarted, 2)
	short := harness.AllData[wire.TaskStarted](t, evs, wire.EventTaskStarted)[1].TaskID
	evs = e.WaitKind(id, wire.EventTaskCompleted, 2)
	if tc := harness.AllData[wire.TaskCompleted](t, evs, wire.EventTaskCompleted)[1]; tc.TaskID != short {
		t.Fatalf("task.completed %+v, want %s", tc, short)
	}
	applied := harness.ByID(e.CheckStream(evs))
	if _, ok := applied["task-"+id+"-"+short]; !ok {
		t.Fatalf("runner's task.result not applied: %v", applied)
	}
	if _, snap := e.session(id); len(snap.Waits.Tasks) != 0 {
		t.Fatalf("tasks still live: %+v", snap.Waits.Tasks)
	}
	e.Send(id, harness.Deliver("still here"))
	e.CheckStream(e.WaitOutput(id, "still here"))
}

// A timeout whose timer ID is stale is applied and ignored; the one that
// carries the checkpoint's timer ID ends the session (expired).
func TestTimeoutCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.StartWith(protocol.StartRequest{DeploymentID: "v1", Timeout: "1h"}).SessionID
	e.WaitKind(id, wire.EventSessionStarted, 1)
	_, snap := e.session(id)
	if snap.Timer == nil || snap.Timer.ID == "" || snap.Timer.Duration != time.Hour {
		t.Fatalf("timer %+v", snap.Timer)
	}

	e.Send(id, harness.WithID("stale", harness.Timeout("stale-"+snap.Timer.ID)))
	e.WaitApplied(id, "stale")
	e.Send(id, harness.Deliver("alive"))
	evs := e.WaitOutput(id, "alive")
	if harness.Count(evs, wire.EventSessionEnded) != 0 {
		t.Fatalf("a stale timer ended the session: %s", harness.Kinds(evs))
	}

	e.Send(id, harness.WithID("expire", harness.Timeout(snap.Timer.ID)))
	evs = e.WaitKind(id, wire.EventSessionEnded, 1)
	e.CheckStream(evs)
	if end := harness.FirstData[wire.SessionEnded](t, evs, wire.EventSessionEnded); end.Reason != wire.EndExpired {
		t.Fatalf("ended %+v", end)
	}
	if evs[len(evs)-1].Kind != wire.EventSessionEnded {
		t.Fatalf("session.ended is not the last event: %s", harness.Kinds(evs))
	}
	e.waitEnded(id)
}

// A session started with a short timeout is ended by the server-fired
// message schedule, with nobody publishing a timeout.
func TestTimeoutFiredByServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.StartWith(protocol.StartRequest{DeploymentID: "v1", Timeout: "1s"}).SessionID
	e.Send(id, harness.Deliver("hello"))
	evs := e.WaitKind(id, wire.EventSessionEnded, 1)
	e.CheckStream(evs)
	if end := harness.FirstData[wire.SessionEnded](t, evs, wire.EventSessionEnded); end.Reason != wire.EndExpired {
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
	id := e.Start("v1").SessionID

	e.Send(id, harness.WithID("pause", harness.Control(wire.KindPause)))
	e.WaitKind(id, wire.EventSessionPaused, 1)
	e.Send(id, harness.WithID("held", harness.Deliver("held")))
	// A later immediate command proves the delivery was received: the
	// consumer delivers in stream order.
	e.Send(id, harness.WithID("pause-again", harness.Control(wire.KindPause)))
	evs := e.WaitApplied(id, "pause-again")
	if _, ok := harness.AppliedIDs(evs)["held"]; ok || harness.Count(evs, wire.EventTurnStarted) != 0 || len(e.log.Entries()) != 0 {
		t.Fatalf("a delivery was admitted while paused: %s", harness.Kinds(evs))
	}
	if harness.Count(evs, wire.EventSessionPaused) != 1 {
		t.Fatalf("a repeated pause recorded again: %s", harness.Kinds(evs))
	}
	if cur, _ := e.session(id); cur.Record.State != "paused" {
		t.Fatalf("record state %q", cur.Record.State)
	}

	e.Send(id, harness.WithID("resume", harness.Control(wire.KindResume)))
	evs = e.WaitOutput(id, "held")
	e.CheckStream(evs)
	resumed, started := slices.IndexFunc(evs, harness.IsKind(wire.EventSessionResumed)), slices.IndexFunc(evs, harness.IsKind(wire.EventTurnStarted))
	if resumed < 0 || started < resumed {
		t.Fatalf("turn started before resume: %s", harness.Kinds(evs))
	}
}

// A move to another deployment asks for a handoff; no handoff executor is
// configured (Config.DisableHandoff), so the owner keeps the session, applies the move once and
// keeps working. A move while busy records handoff.skipped before it.
func TestMoveWithoutExecutor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1", func(c *Config) { c.DisableHandoff = true })
	id := e.Start("v1").SessionID
	e.WaitKind(id, wire.EventSessionStarted, 1)

	e.Send(id, harness.WithID("move-idle", harness.Move("v2")))
	e.Send(id, harness.Deliver("after move"))
	e.WaitOutput(id, "after move")

	e.Send(id, harness.Deliver("/sleep 1s"))
	e.WaitKind(id, wire.EventTurnStarted, 2)
	e.Send(id, harness.WithID("move-busy", harness.Move("v2")))
	e.Send(id, harness.Deliver("after busy move"))
	evs := e.WaitOutput(id, "after busy move")
	applied := harness.ByID(e.CheckStream(evs))
	for _, c := range []string{"move-idle", "move-busy"} {
		if _, ok := applied[c]; !ok {
			t.Fatalf("%s not applied", c)
		}
	}
	skips := harness.AllData[wire.HandoffSkipped](t, evs, wire.EventHandoffSkipped)
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
	id := e.Start("v1").SessionID

	e.Send(id, harness.Deliver("/fail"))
	evs := e.WaitKind(id, wire.EventErrorKind, 1)
	if len(harness.Outputs(evs)) != 0 {
		t.Fatalf("failed step's output kept: %q", harness.Outputs(evs))
	}
	e.Send(id, harness.Deliver("recovered"))
	e.WaitOutput(id, "recovered")
	evs = e.WaitKind(id, wire.EventTurnCompleted, 2)
	e.CheckStream(evs)
	if harness.Count(evs, wire.EventTurnCompleted) != 2 || harness.Count(evs, wire.EventSessionEnded) != 0 {
		t.Fatalf("events %s", harness.Kinds(evs))
	}
}

// /done finalizes: session.ended done last, every address tombstoned, the
// consumer deleted, the record ended.
func TestDone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.Start("v1", "done-alias").SessionID

	e.Send("done-alias", harness.Deliver("/done"))
	evs := e.WaitKind(id, wire.EventSessionEnded, 1)
	e.CheckStream(evs)
	if end := harness.FirstData[wire.SessionEnded](t, evs, wire.EventSessionEnded); end.Reason != wire.EndDone {
		t.Fatalf("ended %+v", end)
	}
	if evs[len(evs)-1].Kind != wire.EventSessionEnded {
		t.Fatalf("session.ended is not last: %s", harness.Kinds(evs))
	}
	e.waitEnded(id, "done-alias")
}

// /alias claims an address for the live session; deliveries to it reach it.
func TestAliasDirective(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.Start("v1").SessionID

	e.Send(id, harness.Deliver("/alias thread-42"))
	e.Eventually(wait, "hook thread-42", func() bool { _, ok := e.Hook("thread-42"); return ok })
	if h, _ := e.Hook("thread-42"); h.SessionID != id || h.Tombstone {
		t.Fatalf("hook %+v", h)
	}
	e.Send("thread-42", harness.Deliver("via alias"))
	evs := e.WaitOutput(id, "via alias")
	e.CheckStream(evs)
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
	e.Eventually(wait, "clean-up of "+id, func() bool {
		for _, a := range addrs {
			if h, ok := e.Hook(a); !ok || !h.Tombstone {
				return false
			}
		}
		ids, err := e.Store.ListIndex(e.t.Context(), "p1")
		return (err == nil || errors.Is(err, record.ErrNotFound)) && !slices.Contains(ids, id) && !e.ConsumerExists(cur.Record.Consumer)
	})
	if cur.Record.State != "ended" {
		e.t.Fatalf("record state %q", cur.Record.State)
	}
}

// Tasks run by kind: a kind without a handler on the deployment fails the
// task with code unknown_task_kind (its error lists the kinds it runs); a
// registered handler gets the task's ID, kind and input, its progress note
// goes live, and its result is in task.completed.
func TestTaskKinds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("/fetch https://example.com/x"))
	evs := e.WaitKind(id, wire.EventTaskCompleted, 1)
	done := harness.FirstData[wire.TaskCompletedV2](t, evs, wire.EventTaskCompleted)
	if done.Code != wire.CodeTaskUnknownKind || done.Kind != demo.TaskFetch || !strings.Contains(done.Error, "it runs: sleep") {
		t.Fatalf("task.completed %+v, want unknown_task_kind naming the kinds run", done)
	}

	got := make(chan runtime.TaskRun, 1)
	e.owner("v2", "p2", func(c *Config) {
		c.Tasks = map[string]runtime.TaskHandler{demo.TaskFetch: func(_ context.Context, r runtime.TaskRun) (json.RawMessage, error) {
			r.Progress("half way")
			got <- r
			return json.RawMessage(`{"echo":` + string(r.Input) + `}`), nil
		}}
	})
	other := e.Start("v2").SessionID
	sub, err := e.NC.SubscribeSync(e.Names.Live(other))
	if err != nil {
		t.Fatal(err)
	}
	fetch := harness.Deliver("/fetch https://example.com/y")
	fetch.AcceptedDeploymentID = "v2" // accepted by its own deployment: no handoff
	e.Send(other, fetch)
	evs = e.WaitKind(other, wire.EventTaskCompleted, 1)
	done = harness.FirstData[wire.TaskCompletedV2](t, evs, wire.EventTaskCompleted)
	run := <-got
	started := harness.FirstData[wire.TaskStarted](t, evs, wire.EventTaskStarted)
	if run.ID != started.TaskID || run.Kind != demo.TaskFetch || run.SessionID != other || string(run.Input) != `{"url":"https://example.com/y"}` {
		t.Fatalf("the handler got %+v", run)
	}
	if done.Error != "" || done.Kind != demo.TaskFetch || string(done.Result) != `{"echo":{"url":"https://example.com/y"}}` {
		t.Fatalf("task.completed %+v", done)
	}
	msg, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no live progress note: %v", err)
	}
	if l, err := wire.DecodeLive(msg.Data); err != nil || l.Kind != wire.EventTaskProgress || l.TaskID != run.ID || !strings.Contains(string(l.Data), "half way") {
		t.Fatalf("live %s: %v", msg.Data, err)
	}
}
