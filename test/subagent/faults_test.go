package subagent

import (
	"slices"
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// The fault tests run owner subprocesses: deployment v1 with two
// processes (the second started once the sessions are placed, so it is
// the peer that takes the killed one's sessions over) and, where parent
// and child are to live in different processes, deployment v1b with one.

// The parent's owner SIGKILLed while its child (on v1b, another process)
// runs the delegated turn: the peer takes the parent over, the child's
// result is applied once (one child.completed, "child r: /sleep 2s" once).
func TestKillParentOwner(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	p1 := w.proc("v1", "p1")
	w.proc("v1b", "b1")
	parent := w.start("v1")
	kid := child(parent, "r", 1)
	w.proc("v1", "p2")

	w.Send(parent, stamped("spawn", "v1", "/spawn r@v1b /sleep 2s"))
	w.WaitKind(parent, wire.EventChildStarted, 1)
	w.waitExec(kid, "t1/1", "b1")
	w.kill(p1)

	w.WaitRecord(parent, func(r record.SessionRecord) bool { return r.OwnerProcess == "p2" })
	w.WaitFor(parent, "the child's result applied after the takeover", func(evs []wire.Event) bool {
		return harness.OutputCommitted("child r: /sleep 2s")(evs) && settled(evs)
	})
	w.Send(parent, stamped("after", "v1", "after"))
	evs := w.WaitOutput(parent, "after")
	kevs := w.WaitFor(kid, "the child settled", settled)
	w.checkOnce(parent, kid, evs, kevs)
	if r := w.Record(kid).Record; r.DeploymentID != "v1b" || r.OwnerProcess != "b1" {
		t.Fatalf("child on %s/%s, want v1b/b1", r.DeploymentID, r.OwnerProcess)
	}
	w.check(parent, evs, "p1")
	w.check(kid, kevs, "")
}

// The child's owner SIGKILLed mid-turn (the parent on v1b, another
// process): the peer takes the child over, runs the interrupted step again
// and the child reports once.
func TestKillChildOwner(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.proc("v1b", "b1")
	p1 := w.proc("v1", "p1")
	parent := w.start("v1b")
	kid := child(parent, "r", 1)
	// The child is created on p1, the only owner of v1 yet.
	w.Send(parent, stamped("spawn", "v1b", "/spawn r@v1 warm"))
	w.WaitOutput(parent, "child r: warm")
	w.proc("v1", "p2")

	w.Send(parent, stamped("sleep", "v1b", "/continue r /sleep 2s"))
	w.waitExec(kid, "t2/1", "p1")
	w.kill(p1)

	w.WaitRecord(kid, func(r record.SessionRecord) bool { return r.OwnerProcess == "p2" })
	w.WaitFor(parent, "the child's result after its takeover", func(evs []wire.Event) bool {
		return harness.OutputCommitted("child r: /sleep 2s")(evs) && settled(evs)
	})
	w.Send(parent, stamped("after", "v1b", "after"))
	evs := w.WaitOutput(parent, "after")
	kevs := w.WaitFor(kid, "the child settled", settled)
	w.checkOnce(parent, kid, evs, kevs)
	runs := harness.Runs(w.execs(), kid)["t2/1"]
	if !slices.Equal(runs, []string{"p1", "p2"}) && !slices.Equal(runs, []string{"p1"}) {
		t.Fatalf("the child's sleep step ran in %v, want p1 (then p2 if the kill cut it short)", runs)
	}
	t.Logf("the child's sleep step ran in %v", runs)
	w.check(parent, evs, "")
	w.check(kid, kevs, "p1")
}

// The one process that owns both parent and child SIGKILLed while the
// child runs: the peer recovers both; the child reports once and its
// parent applies the result once.
func TestKillOwnerOfBoth(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	p1 := w.proc("v1", "p1")
	parent := w.start("v1")
	kid := child(parent, "r", 1)
	w.Send(parent, stamped("spawn", "v1", "/spawn r warm"))
	w.WaitOutput(parent, "child r: warm")
	w.proc("v1", "p2")

	w.Send(parent, stamped("sleep", "v1", "/continue r /sleep 2s"))
	w.waitExec(kid, "t2/1", "p1")
	w.kill(p1)

	for _, id := range []string{parent, kid} {
		w.WaitRecord(id, func(r record.SessionRecord) bool { return r.OwnerProcess == "p2" })
	}
	w.WaitFor(parent, "the child's result after the takeover", func(evs []wire.Event) bool {
		return harness.OutputCommitted("child r: /sleep 2s")(evs) && settled(evs)
	})
	w.Send(parent, stamped("after", "v1", "after"))
	evs := w.WaitOutput(parent, "after")
	kevs := w.WaitFor(kid, "the child settled", settled)
	w.checkOnce(parent, kid, evs, kevs)
	w.check(parent, evs, "p1")
	w.check(kid, kevs, "p1")
}

// checkOnce: the child's last delegated turn (the /sleep 2s) completed
// once in the child and once in the parent (child.completed naming it),
// and its result was output once.
func (w *world) checkOnce(parent, kid string, evs, kevs []wire.Event) {
	w.t.Helper()
	if n := count(harness.Outputs(evs), "child r: /sleep 2s"); n != 1 {
		w.t.Fatalf("parent output the result %d times: %q", n, harness.Outputs(evs))
	}
	turns := harness.AllData[wire.TurnCompleted](w.t, kevs, wire.EventTurnCompleted)
	last := turns[len(turns)-1].TurnID
	var forLast []wire.ChildCompleted
	for _, d := range harness.AllData[wire.ChildCompleted](w.t, evs, wire.EventChildCompleted) {
		if d.TurnID == last {
			forLast = append(forLast, d)
		}
	}
	if len(forLast) != 1 || forLast[0].Outcome != wire.ChildDone || forLast[0].ChildSessionID != kid {
		w.t.Fatalf("child.completed for the child's turn %s: %+v, want one (done)", last, forLast)
	}
	if n := count(harness.Outputs(kevs), "/sleep 2s"); n != 1 {
		w.t.Fatalf("child output /sleep 2s %d times: %q", n, harness.Outputs(kevs))
	}
	var ids []string
	for _, tc := range turns {
		if slices.Contains(ids, tc.TurnID) {
			w.t.Fatalf("child turn %s completed twice: %s", tc.TurnID, harness.Trace(kevs))
		}
		ids = append(ids, tc.TurnID)
	}
}
