package subagent

import (
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// /close r ends the child (session.ended {reason: closed}, data version 3)
// and records child.closed on the parent; the name used again opens
// generation 2: another child session.
func TestCloseEndsChild(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.owner("v1", "p1")
	parent := w.start("v1")
	first, second := child(parent, "r", 1), child(parent, "r", 2)
	if first == second {
		t.Fatalf("generations 1 and 2 derive one ID %s", first)
	}

	w.Send(parent, stamped("spawn", "v1", "/spawn r hello"))
	w.WaitOutput(parent, "child r: hello")
	w.Send(parent, stamped("close", "v1", "/close r"))
	evs := w.WaitKind(parent, wire.EventChildClosed, 1)
	if cl := harness.FirstData[wire.ChildClosed](t, evs, wire.EventChildClosed); cl != (wire.ChildClosed{Handle: "r", ChildSessionID: first}) {
		t.Fatalf("child.closed %+v", cl)
	}
	kevs := w.WaitKind(first, wire.EventSessionEnded, 1)
	if e, _ := harness.Find(kevs, harness.IsKind(wire.EventSessionEnded)); e.V != 3 {
		t.Fatalf("session.ended data version %d, want 3", e.V)
	}
	if end := harness.FirstData[wire.SessionEndedV3](t, kevs, wire.EventSessionEnded); end.Reason != wire.EndClosed {
		t.Fatalf("session.ended %+v, want reason closed", end)
	}
	w.WaitRecord(first, func(r record.SessionRecord) bool { return r.State == record.StateEnded })
	w.waitHandle(parent, "r", wire.HandleClosed)

	w.Send(parent, stamped("again", "v1", "/spawn r second"))
	evs = w.WaitFor(parent, "the second child's result and settled", func(evs []wire.Event) bool {
		return harness.OutputCommitted("child r: second")(evs) && settled(evs)
	})
	started := harness.AllData[wire.ChildStarted](t, evs, wire.EventChildStarted)
	if len(started) != 2 || started[0].ChildSessionID != first || started[1].ChildSessionID != second {
		t.Fatalf("child.started %+v, want %s then %s", started, first, second)
	}
	if h := w.waitHandle(parent, "r", wire.HandleParked); h.Generation != 2 || h.ChildSessionID != second {
		t.Fatalf("handle r %+v, want generation 2 (%s)", h, second)
	}
	if _, snap := w.checkpoint(second); snap.Parent == nil || snap.Parent.SessionID != parent {
		t.Fatalf("second child's parent %+v", snap.Parent)
	}
	if hook, ok := w.Hook(wire.ChildAlias(parent, "r", 2)); !ok || hook.SessionID != second {
		t.Fatalf("alias of generation 2: %+v %v", hook, ok)
	}
	kevs = w.Events(first)
	w.check(parent, evs, "")
	w.check(first, kevs, "")
	w.check(second, w.WaitFor(second, "the second child settled", settled), "")
}

// A cancel of the parent mid-delegation cancels the child's turn: the
// child records turn.cancelled, the parent child.completed {outcome:
// cancelled}, and the handle parks again.
func TestCancelCascades(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.owner("v1", "p1")
	parent := w.start("v1")
	kid := child(parent, "r", 1)

	w.Send(parent, stamped("spawn", "v1", "/spawn r /sleep 5s"))
	w.WaitKind(parent, wire.EventChildStarted, 1)
	w.waitExec(kid, "t1/1", "p1")
	w.Send(parent, harness.WithID("cancel", harness.Control(wire.KindCancel)))

	kevs := w.WaitKind(kid, wire.EventTurnCancelled, 1)
	evs := w.WaitKind(parent, wire.EventChildCompleted, 1)
	done := harness.FirstData[wire.ChildCompleted](t, evs, wire.EventChildCompleted)
	kt := harness.FirstData[wire.TurnCancelled](t, kevs, wire.EventTurnCancelled)
	if done != (wire.ChildCompleted{Handle: "r", ChildSessionID: kid, TurnID: kt.TurnID, Outcome: wire.ChildCancelled}) {
		t.Fatalf("child.completed %+v, want r's turn %s cancelled", done, kt.TurnID)
	}
	if n := harness.Count(evs, wire.EventTurnCancelled); n != 1 {
		t.Fatalf("parent: %d turn.cancelled: %s", n, harness.Trace(evs))
	}
	w.waitHandle(parent, "r", wire.HandleParked)
	if n := harness.Count(kevs, wire.EventTurnCompleted); n != 0 {
		t.Fatalf("the child's turn completed as well as cancelled: %s", harness.Trace(kevs))
	}
	for _, o := range harness.Outputs(w.Events(parent)) {
		if o != "/spawn r /sleep 5s" {
			t.Fatalf("parent outputs %q after the cancel, want only the spawn's", harness.Outputs(evs))
		}
	}
	// The child's cancel came from its parent: applied once.
	w.check(parent, w.WaitFor(parent, "the parent settled", settled), "")
	w.check(kid, w.WaitFor(kid, "the child settled", settled), "")
}
