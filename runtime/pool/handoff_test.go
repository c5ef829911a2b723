package pool

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// stamped is a delivery accepted by the ingress of deployment dep.
func stamped(id, dep, text string) wire.Command {
	c := harness.WithID(id, harness.Deliver(text))
	c.AcceptedDeploymentID = dep
	return c
}

// execs are the processes that ran steps of a session, in order.
func (e *env) execs(id string) []string {
	var out []string
	for _, x := range e.log.Entries() {
		if x.SessionID == id {
			out = append(out, x.Process)
		}
	}
	return out
}

// waitOwner waits until the record names deployment dep and returns its epoch.
func (e *env) waitOwner(id, dep string) uint64 {
	e.t.Helper()
	return e.WaitRecord(id, func(r record.SessionRecord) bool { return r.DeploymentID == dep && r.State == "active" }).Record.Epoch
}

// An idle session on v1 receiving a delivery accepted by v2 moves to v2:
// one claim (epoch+1), the trigger applied once and answered by the v2
// owner, the same session ID and event stream, seq contiguous.
func TestHandoffMovesIdleSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	e.owner("v2", "p2")
	id := e.Start("v1").SessionID
	e.Send(id, stamped("a1", "v1", "hello v1"))
	e.WaitOutput(id, "hello v1")
	before, _ := e.session(id)
	nExec := len(e.execs(id))

	e.Send(id, stamped("t2", "v2", "hello v2"))
	evs := e.WaitOutput(id, "hello v2")
	after, _ := e.session(id)
	if after.Record.DeploymentID != "v2" || after.Record.Epoch != before.Record.Epoch+1 || after.Record.OwnerProcess != "p2" {
		t.Fatalf("record after handoff: deployment %s epoch %d process %s (before epoch %d)",
			after.Record.DeploymentID, after.Record.Epoch, after.Record.OwnerProcess, before.Record.Epoch)
	}
	if after.Record.SessionID != id || after.Record.State != "active" {
		t.Fatalf("record after handoff: %+v", after.Record)
	}
	ex := e.execs(id)[nExec:]
	if len(ex) == 0 || ex[0] != "p2" {
		t.Fatalf("steps after the trigger ran on %v, want p2", ex)
	}
	applied := harness.ByID(e.CheckStream(evs))
	if _, ok := applied["t2"]; !ok {
		t.Fatal("trigger not applied")
	}
	if n := harness.Count(evs, wire.EventHandoffSkipped); n != 0 {
		t.Fatalf("%d handoff.skipped on an idle session", n)
	}
	started, completed := handoffEvents(t, evs, "t2", wire.EventHandoffCompleted)
	var st wire.HandoffStarted
	var done wire.HandoffCompleted
	decodeData(t, started, &st)
	decodeData(t, completed, &done)
	if st.HandoffID == "" || st.HandoffID != done.HandoffID || st.TargetDeploymentID != "v2" || st.Trigger.CommandID != "t2" {
		t.Fatalf("handoff.started %+v, handoff.completed %+v", st, done)
	}
	if done.FromDeploymentID != "v1" || done.ToDeploymentID != "v2" || done.Epoch != after.Record.Epoch || completed.DeploymentID != "v2" {
		t.Fatalf("handoff.completed %+v from %s, want v1 → v2 at epoch %d", done, completed.DeploymentID, after.Record.Epoch)
	}
	// The successor keeps serving the same session and stream.
	e.Send(id, stamped("a3", "v2", "still here"))
	evs = e.WaitOutput(id, "still here")
	e.CheckStream(evs)
	if cur, _ := e.session(id); cur.Record.Epoch != after.Record.Epoch {
		t.Fatalf("epoch moved again to %d without a handoff", cur.Record.Epoch)
	}
}

// A delivery accepted by the session's own deployment never hands off.
func TestHandoffNotForSameDeployment(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	e.owner("v2", "p2")
	id := e.Start("v1").SessionID
	before, _ := e.session(id)
	for _, c := range []string{"s1", "s2", "s3"} {
		e.Send(id, stamped(c, "v1", "text "+c))
	}
	evs := e.WaitApplied(id, "s3")
	e.CheckStream(evs)
	after, _ := e.session(id)
	if after.Record.DeploymentID != "v1" || after.Record.Epoch != before.Record.Epoch || after.Record.Handoff != nil {
		t.Fatalf("record after same-deployment deliveries: deployment %s epoch %d handoff %+v",
			after.Record.DeploymentID, after.Record.Epoch, after.Record.Handoff)
	}
	for _, p := range e.execs(id) {
		if p != "p1" {
			t.Fatalf("a step ran on %s", p)
		}
	}
}

// A busy session skips the handoff (handoff.skipped busy) and stays; a
// later eligible delivery moves it.
func TestHandoffSkippedWhileBusy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	e.owner("v2", "p2")
	id := e.Start("v1").SessionID
	e.Send(id, stamped("sl", "v1", "/sleep 2s"))
	e.WaitFor(id, "the sleep step running", func([]wire.Event) bool { return len(e.execs(id)) > 0 })
	e.Send(id, stamped("b1", "v2", "busy v2"))
	evs := e.WaitKind(id, wire.EventHandoffSkipped, 1)
	sk := harness.FirstData[wire.HandoffSkipped](t, evs, wire.EventHandoffSkipped)
	if sk.Reason != "busy" || sk.CommandID != "b1" || sk.TargetDeploymentID != "v2" {
		t.Fatalf("handoff.skipped %+v", sk)
	}
	e.WaitOutput(id, "busy v2")
	e.WaitKind(id, wire.EventTurnCompleted, 1)
	if cur, _ := e.session(id); cur.Record.DeploymentID != "v1" {
		t.Fatalf("busy session moved to %s", cur.Record.DeploymentID)
	}
	nExec := len(e.execs(id))
	e.Send(id, stamped("b2", "v2", "idle v2"))
	evs = e.WaitOutput(id, "idle v2")
	e.waitOwner(id, "v2")
	if ex := e.execs(id)[nExec:]; len(ex) == 0 || ex[0] != "p2" {
		t.Fatalf("steps after the eligible trigger ran on %v", ex)
	}
	applied := harness.ByID(e.CheckStream(evs))
	for _, c := range []string{"sl", "b1", "b2"} {
		if _, ok := applied[c]; !ok {
			t.Fatalf("%s not applied", c)
		}
	}
}

// A→B→A→B on one session: one owner at a time, every command once.
func TestHandoffPingPong(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	e.owner("v2", "p2")
	id := e.Start("v1").SessionID
	cur, _ := e.session(id)
	epoch := cur.Record.Epoch
	var ids []string
	for i, dep := range []string{"v2", "v1", "v2", "v1"} {
		c := "pp" + string(rune('a'+i))
		ids = append(ids, c)
		e.Send(id, stamped(c, dep, "to "+dep+" "+c))
		e.WaitOutput(id, "to "+dep+" "+c)
		next := e.waitOwner(id, dep)
		if next <= epoch {
			t.Fatalf("hop %d to %s: epoch %d not above %d", i, dep, next, epoch)
		}
		epoch = next
		want := map[string]string{"v1": "p1", "v2": "p2"}[dep]
		if ex := e.execs(id); ex[len(ex)-1] != want {
			t.Fatalf("hop %d: last step ran on %s, want %s", i, ex[len(ex)-1], want)
		}
	}
	evs := e.Events(id)
	applied := harness.ByID(e.CheckStream(evs))
	for _, c := range ids {
		if _, ok := applied[c]; !ok {
			t.Fatalf("%s not applied", c)
		}
	}
}

// No owner of the target deployment: the session stays and processes the
// trigger once.
func TestHandoffNoResponders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.Start("v1").SessionID
	before, _ := e.session(id)
	e.Send(id, stamped("n1", "v3", "nobody"))
	evs := e.WaitOutput(id, "nobody")
	applied := harness.ByID(e.CheckStream(evs))
	if _, ok := applied["n1"]; !ok {
		t.Fatal("trigger not applied")
	}
	started, failed := handoffEvents(t, evs, "n1", wire.EventHandoffFailed)
	var st wire.HandoffStarted
	var f wire.HandoffFailed
	decodeData(t, started, &st)
	decodeData(t, failed, &f)
	if st.HandoffID == "" || st.HandoffID != f.HandoffID || st.TargetDeploymentID != "v3" || f.TargetDeploymentID != "v3" || st.Trigger.CommandID != "n1" {
		t.Fatalf("handoff.started %+v, handoff.failed %+v", st, f)
	}
	if !strings.HasPrefix(f.Reason, "start: ") {
		t.Fatalf("handoff.failed reason %q does not name the step", f.Reason)
	}
	if n := harness.Count(evs, wire.EventHandoffSkipped); n != 0 {
		t.Fatalf("%d handoff.skipped for a failed handoff", n)
	}
	time.Sleep(200 * time.Millisecond)
	after, _ := e.session(id)
	if after.Record.DeploymentID != "v1" || after.Record.Epoch != before.Record.Epoch || after.Record.State != "active" {
		t.Fatalf("record: deployment %s epoch %d state %s", after.Record.DeploymentID, after.Record.Epoch, after.Record.State)
	}
	if h := after.Record.Handoff; h == nil || h.Target != "v3" {
		t.Fatalf("handoff outcome not recorded: %+v", h)
	}
	e.Send(id, stamped("n2", "v1", "after"))
	e.CheckStream(e.WaitOutput(id, "after"))
	if got := harness.Count(e.Events(id), wire.EventCommandApplied); got != len(harness.AppliedIDs(e.Events(id))) {
		t.Fatal("duplicate applied")
	}
}

// handoffEvents checks that the stream holds exactly one handoff.started and
// one end event (handoff.completed or handoff.failed), in that order, both
// before the trigger's command.applied, and returns them.
func handoffEvents(t *testing.T, evs []wire.Event, trigger, end string) (wire.Event, wire.Event) {
	t.Helper()
	if n, m := harness.Count(evs, wire.EventHandoffStarted), harness.Count(evs, end); n != 1 || m != 1 {
		t.Fatalf("%d handoff.started and %d %s, want one each", n, m, end)
	}
	idx := map[string]int{}
	for i, ev := range evs {
		switch ev.Kind {
		case wire.EventHandoffStarted, end:
			idx[ev.Kind] = i
		case wire.EventCommandApplied:
			var d struct {
				CommandID string `json:"commandId"`
			}
			decodeData(t, ev, &d)
			if d.CommandID == trigger {
				idx[ev.Kind] = i
			}
		}
	}
	s, e, a := idx[wire.EventHandoffStarted], idx[end], idx[wire.EventCommandApplied]
	if a == 0 || s >= e || e >= a {
		t.Fatalf("order: handoff.started at %d, %s at %d, command.applied %s at %d", s, end, e, trigger, a)
	}
	if evs[e].DeploymentID != evs[a].DeploymentID {
		t.Fatalf("%s from %s but the trigger applied by %s", end, evs[e].DeploymentID, evs[a].DeploymentID)
	}
	return evs[s], evs[e]
}

func decodeData(t *testing.T, ev wire.Event, v any) {
	t.Helper()
	if err := json.Unmarshal(ev.Data, v); err != nil {
		t.Fatalf("%s data %s: %v", ev.Kind, ev.Data, err)
	}
}
