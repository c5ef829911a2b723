package pool

import (
	"slices"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// Sessions of a retired deployment whose owner is gone are adopted by the
// deployment that produced their next command: an idle one cleanly; a
// hibernated one through the adopter's inbox sweeper when its wake went to
// the retired deployment; one with an uncommitted step records
// step.interrupted and runs the step again on the adopter; one waiting for
// input stays until an operator's forced move, which cancels its wait.
func TestAdoptRetired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p1 := e.owner("v1", "p1")
	idle := e.Start("v1").SessionID
	busy := e.Start("v1").SessionID
	asking := e.Start("v1").SessionID
	e.Send(idle, harness.Deliver("hello"))
	e.WaitOutput(idle, "hello")
	e.Send(asking, harness.Deliver("/ask name?"))
	e.WaitKind(asking, wire.EventInputRequested, 1)

	// A sleepy session hibernates on a second v1 process first.
	p1b := e.owner("v1", "p1b", hibernating(100*time.Millisecond, 0))
	sleepy := e.startOn("p1b", "v1")
	e.Send(sleepy, harness.Deliver("zzz"))
	e.WaitOutput(sleepy, "zzz")
	e.waitHibernated(sleepy)

	// The busy session's step runs when p1 goes: started last, so that
	// nothing slow (the set-up above, on a loaded machine) lets it commit
	// first — a timing assumption of the test, not of the code.
	e.Send(busy, harness.Deliver("/sleep 3s"))
	e.Eventually(wait, "the sleep step running on p1", func() bool { return slices.Contains(e.stepRuns(busy), "t1/1 p1") })

	if _, changed, err := e.Store.RetireDeployment(t.Context(), "v1"); err != nil || !changed {
		t.Fatalf("retire v1: %v %v", changed, err)
	}
	_ = p1.Stop() // gone without a drain: its step uncommitted, records still name it
	_ = p1b.Stop()
	e.owner("v2", "p2", hibernating(time.Hour, 0))

	// Idle: the delivery accepted by v2 and its wake on v2 adopt it.
	e.Send(idle, withDep("v2", harness.Deliver("on v2")))
	e.Wake("v2", idle)
	evs := e.WaitOutput(idle, "on v2")
	checkAdopted(t, e, idle, evs, false)

	// Uncommitted step: interrupted, run again on v2.
	e.Send(busy, withDep("v2", harness.Deliver("next")))
	e.Wake("v2", busy)
	evs = e.WaitOutput(busy, "next")
	checkAdopted(t, e, busy, evs, false)
	if n := harness.Count(evs, wire.EventStepInterrupted); n != 1 {
		t.Fatalf("step.interrupted × %d: %v", n, harness.Kinds(evs))
	}
	if runs := e.stepRuns(busy); !slices.Contains(runs, "t1/1 p1") || !slices.Contains(runs, "t1/1 p2") {
		t.Fatalf("the interrupted step ran %v, want on p1 and again on p2", runs)
	}

	// Hibernated: its wake goes to retired v1 only; v2's sweeper adopts it.
	e.Send(sleepy, withDep("v1", harness.Deliver("late for v1")))
	e.Wake("v1", sleepy)
	evs = e.WaitOutput(sleepy, "late for v1")
	checkAdopted(t, e, sleepy, evs, false)

	// Waiting for input: an unforced command does not move it.
	e.Send(asking, withDep("v2", harness.Deliver("hello?")))
	e.Wake("v2", asking)
	time.Sleep(1500 * time.Millisecond) // several inbox sweeps on v2; none may adopt it
	if cur, _ := e.session(asking); cur.Record.DeploymentID != "v1" {
		t.Fatalf("a session waiting for input moved without force: %+v", cur.Record)
	}
	mv := harness.Move("v2")
	mv.Move.Force = true
	mvSeq := e.Send(asking, withDep("v2", mv))
	e.Wake("v2", asking)
	// The move is applied after hello? (inbox order), in the same or a
	// later commit, whose events are appended in the background: wait for
	// both.
	evs = e.WaitFor(asking, "forced adoption, hello? and the move applied", func(evs []wire.Event) bool {
		return slices.ContainsFunc(evs, harness.IsOutput("hello?")) &&
			slices.ContainsFunc(e.Applied(evs), func(a wire.CommandApplied) bool { return a.Seq == mvSeq })
	})
	checkAdopted(t, e, asking, evs, true)
	if !slices.ContainsFunc(e.Applied(evs), func(a wire.CommandApplied) bool { return a.Seq == mvSeq && a.Kind == "move" }) {
		t.Fatalf("the forced move (seq %d) was not applied: %v", mvSeq, e.Applied(evs))
	}
}

// checkAdopted: the record names v2, the stream shows one
// handoff.completed from v1 to v2, every command applied once, and — when
// forced — the input wait cancelled.
func checkAdopted(t *testing.T, e *env, id string, evs []wire.Event, forced bool) {
	t.Helper()
	cur, _ := e.session(id)
	if cur.Record.DeploymentID != "v2" || cur.Record.State == record.StateHandoff {
		t.Fatalf("session %s after adoption: %+v", id, cur.Record)
	}
	done := harness.AllData[wire.HandoffCompleted](t, evs, wire.EventHandoffCompleted)
	if len(done) != 1 || done[0].FromDeploymentID != "v1" || done[0].ToDeploymentID != "v2" || done[0].Epoch != cur.Record.Epoch {
		t.Fatalf("session %s handoff.completed %+v (epoch %d)", id, done, cur.Record.Epoch)
	}
	e.CheckStream(evs)
	for cid, n := range countApplied(evs) {
		if n != 1 {
			t.Fatalf("session %s: %s applied %d times", id, cid, n)
		}
	}
	if forced {
		w := harness.AllData[wire.WaitCancelled](t, evs, wire.EventWaitCancelled)
		if len(w) != 1 || w[0].Wait != wire.WaitInput {
			t.Fatalf("session %s wait.cancelled %+v", id, w)
		}
	}
}

// withDep stamps a command as accepted by deployment dep.
func withDep(dep string, c wire.Command) wire.Command {
	c.AcceptedDeploymentID = dep
	return c
}

// startOn starts a session on one process of a deployment (the start goes
// to the pool's queue group; retried until that process answers).
func (e *env) startOn(process, deployment string) string {
	e.t.Helper()
	var id string
	e.Eventually(wait, "a start served by "+process, func() bool {
		r, err := e.Env.Start(e.t.Context(), protocol.StartRequest{DeploymentID: deployment}, harness.RequestTimeout)
		if err != nil {
			return false
		}
		cur, _ := e.session(r.SessionID)
		id = r.SessionID
		return cur.Record.OwnerProcess == process
	})
	return id
}

// A forced move of a session kept on its (live) owner only by a wait: the
// owner cancels the wait (wait.cancelled on its own deployment, committed)
// and hands the session off with the move as the trigger. A plain move of
// the same session skips (reason input).
func TestForcedMoveLiveOwner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	e.owner("v2", "p2")
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("/ask name?"))
	e.WaitKind(id, wire.EventInputRequested, 1)
	e.Send(id, withDep("v2", harness.Move("v2")))
	e.WaitKind(id, wire.EventHandoffSkipped, 1)
	mv := harness.Move("v2")
	mv.Move.Force = true
	e.Send(id, withDep("v2", mv))
	e.waitOwner(id, "v2")
	evs := e.WaitKind(id, wire.EventHandoffCompleted, 1)
	e.CheckStream(evs)
	w := harness.AllData[wire.WaitCancelled](t, evs, wire.EventWaitCancelled)
	i := slices.IndexFunc(evs, harness.IsKind(wire.EventWaitCancelled))
	if len(w) != 1 || w[0].Wait != wire.WaitInput || evs[i].DeploymentID != "v1" || i > slices.IndexFunc(evs, harness.IsKind(wire.EventHandoffStarted)) {
		t.Fatalf("wait.cancelled %+v at %d: want one input wait cancelled on v1 before the handoff; %v", w, i, harness.Kinds(evs))
	}
	e.Send(id, withDep("v2", harness.Deliver("on v2")))
	evs = e.WaitOutput(id, "on v2")
	for cid, n := range countApplied(evs) {
		if n != 1 {
			t.Fatalf("%s applied %d times", cid, n)
		}
	}
}
