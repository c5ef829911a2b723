package pool

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

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
	idle := e.start("v1").SessionID
	busy := e.start("v1").SessionID
	asking := e.start("v1").SessionID
	e.send(idle, deliver("hello"))
	e.waitOutput(idle, "hello")
	e.send(asking, deliver("/ask name?"))
	e.waitKind(asking, wire.EventInputRequested, 1)
	e.send(busy, deliver("/sleep 1500ms"))
	e.eventually(wait, "the sleep step running on p1", func() bool { return slices.Contains(e.stepRuns(busy), "t1/1 p1") })

	// A sleepy session hibernates on a second v1 process first.
	p1b := e.owner("v1", "p1b", hibernating(100*time.Millisecond, 0))
	sleepy := e.startOn("p1b", "v1")
	e.send(sleepy, deliver("zzz"))
	e.waitOutput(sleepy, "zzz")
	e.waitHibernated(sleepy)

	if _, changed, err := e.store.RetireDeployment(t.Context(), "v1"); err != nil || !changed {
		t.Fatalf("retire v1: %v %v", changed, err)
	}
	p1.stop() // gone without a drain: its step uncommitted, records still name it
	p1b.stop()
	e.owner("v2", "p2", hibernating(time.Hour, 0))

	// Idle: the delivery accepted by v2 and its wake on v2 adopt it.
	e.send(idle, withDep("v2", deliver("on v2")))
	e.wake("v2", idle)
	evs := e.waitOutput(idle, "on v2")
	checkAdopted(t, e, idle, evs, false)

	// Uncommitted step: interrupted, run again on v2.
	e.send(busy, withDep("v2", deliver("next")))
	e.wake("v2", busy)
	evs = e.waitOutput(busy, "next")
	checkAdopted(t, e, busy, evs, false)
	if n := count(evs, wire.EventStepInterrupted); n != 1 {
		t.Fatalf("step.interrupted × %d: %v", n, kinds(evs))
	}
	if runs := e.stepRuns(busy); !slices.Contains(runs, "t1/1 p1") || !slices.Contains(runs, "t1/1 p2") {
		t.Fatalf("the interrupted step ran %v, want on p1 and again on p2", runs)
	}

	// Hibernated: its wake goes to retired v1 only; v2's sweeper adopts it.
	e.send(sleepy, withDep("v1", deliver("late for v1")))
	e.wake("v1", sleepy)
	evs = e.waitOutput(sleepy, "late for v1")
	checkAdopted(t, e, sleepy, evs, false)

	// Waiting for input: an unforced command does not move it.
	e.send(asking, withDep("v2", deliver("hello?")))
	e.wake("v2", asking)
	time.Sleep(1500 * time.Millisecond) // several inbox sweeps on v2; none may adopt it
	if cur, _ := e.session(asking); cur.Record.DeploymentID != "v1" {
		t.Fatalf("a session waiting for input moved without force: %+v", cur.Record)
	}
	mv := move("v2")
	mv.Move.Force = true
	mvSeq := e.send(asking, withDep("v2", mv))
	e.wake("v2", asking)
	// The move is applied after hello? (inbox order), in the same or a
	// later commit, whose events are appended in the background: wait for
	// both.
	evs = e.waitFor(asking, "forced adoption, hello? and the move applied", func(evs []wire.Event) bool {
		return slices.ContainsFunc(evs, isOutput("hello?")) &&
			slices.ContainsFunc(appliedOrder(evs), func(a wire.CommandApplied) bool { return a.Seq == mvSeq })
	})
	checkAdopted(t, e, asking, evs, true)
	if !slices.ContainsFunc(appliedOrder(evs), func(a wire.CommandApplied) bool { return a.Seq == mvSeq && a.Kind == "move" }) {
		t.Fatalf("the forced move (seq %d) was not applied: %v", mvSeq, appliedOrder(evs))
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
	done := dataAll[wire.HandoffCompleted](t, evs, wire.EventHandoffCompleted)
	if len(done) != 1 || done[0].FromDeploymentID != "v1" || done[0].ToDeploymentID != "v2" || done[0].Epoch != cur.Record.Epoch {
		t.Fatalf("session %s handoff.completed %+v (epoch %d)", id, done, cur.Record.Epoch)
	}
	checkStream(t, evs)
	for cid, n := range countApplied(evs) {
		if n != 1 {
			t.Fatalf("session %s: %s applied %d times", id, cid, n)
		}
	}
	if forced {
		w := dataAll[wire.WaitCancelled](t, evs, wire.EventWaitCancelled)
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
	e.eventually(wait, "a start served by "+process, func() bool {
		data, _ := json.Marshal(protocol.StartRequest{DeploymentID: deployment})
		msg, err := e.nc.Request(e.names.Start(deployment), data, 10*time.Second)
		if err != nil {
			return false
		}
		var r protocol.StartReply
		if json.Unmarshal(msg.Data, &r) != nil || r.Error != nil {
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
	id := e.start("v1").SessionID
	e.send(id, deliver("/ask name?"))
	e.waitKind(id, wire.EventInputRequested, 1)
	e.send(id, withDep("v2", move("v2")))
	e.waitKind(id, wire.EventHandoffSkipped, 1)
	mv := move("v2")
	mv.Move.Force = true
	e.send(id, withDep("v2", mv))
	e.waitOwner(id, "v2")
	evs := e.waitKind(id, wire.EventHandoffCompleted, 1)
	checkStream(t, evs)
	w := dataAll[wire.WaitCancelled](t, evs, wire.EventWaitCancelled)
	i := index(evs, isKind(wire.EventWaitCancelled))
	if len(w) != 1 || w[0].Wait != wire.WaitInput || evs[i].DeploymentID != "v1" || i > index(evs, isKind(wire.EventHandoffStarted)) {
		t.Fatalf("wait.cancelled %+v at %d: want one input wait cancelled on v1 before the handoff; %v", w, i, kinds(evs))
	}
	e.send(id, withDep("v2", deliver("on v2")))
	evs = e.waitOutput(id, "on v2")
	for cid, n := range countApplied(evs) {
		if n != 1 {
			t.Fatalf("%s applied %d times", cid, n)
		}
	}
}
