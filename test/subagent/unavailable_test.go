package subagent

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/harness/inproc"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/wire"
)

// A parent on v1 delegates to deployment gray, which has a record (it
// advertises the inbox versions it reads) but no running owner: the send
// that creates the child is retried outside the session loop, so the
// parent keeps applying commands, and after --child-send-timeout (from
// the delegation, durable across restarts) the delegation fails with
// child_unavailable.

// cancelBound bounds the wait for a cancel sent while a child send is
// pending: the parent applies commands while its send waits.
const cancelBound = 10 * time.Second

// ghost starts and stops an owner of dep: the deployment then has a record
// but no running owner.
func (w *world) ghost(dep string) {
	w.t.Helper()
	o := w.owner(dep, dep+"-gone")
	w.Check(o.Stop())
}

// parentOwner starts an in-process owner of v1 with process ID pid whose
// child sends time out after timeout.
func (w *world) parentOwner(pid string, timeout time.Duration) *inproc.Owner {
	w.t.Helper()
	return w.owner("v1", pid, func(c *pool.Config) { c.ChildSendTimeout = timeout })
}

// waitPending waits until the parent's checkpoint holds the child send
// pending (state version 6) and returns it.
func (w *world) waitPending(parent string) runtime.PendingSend {
	w.t.Helper()
	var p runtime.PendingSend
	w.Eventually(wait, "the child send pending in "+parent+"'s checkpoint", func() bool {
		rec, snap := w.checkpoint(parent)
		if v, _ := wire.ReadStateVersion(rec.Checkpoint); v != 6 || len(snap.PendingSends) != 1 {
			return false
		}
		p = snap.PendingSends[0]
		return true
	})
	return p
}

// unavailable waits for the parent's child.completed of handle x and
// checks it: data version 2, failed, error child_unavailable, no child
// turn. It returns the event.
func (w *world) unavailable(parent string) wire.Event {
	w.t.Helper()
	evs := w.WaitKind(parent, wire.EventChildCompleted, 1)
	e, _ := harness.Find(evs, harness.IsKind(wire.EventChildCompleted))
	d := harness.FirstData[wire.ChildCompletedV2](w.t, evs, wire.EventChildCompleted)
	if e.V != 2 || d.Outcome != wire.ChildFailed || d.Error == nil || d.Error.Code != wire.CodeChildUnavailable ||
		d.TurnID != runtime.NoChildTurn || d.Handle != "x" || d.ChildSessionID != child(parent, "x", 1) {
		w.t.Fatalf("child.completed v%d %+v (error %+v), want v2 failed with child_unavailable", e.V, d, d.Error)
	}
	return e
}

// answered checks the parent after its delegation failed: the handle is
// closed, nothing is pending (the checkpoint back at state version 5), no
// child exists, the waiting turn saw the failed result, and a following
// delivery is answered.
func (w *world) answered(parent string) {
	w.t.Helper()
	w.waitHandle(parent, "x", wire.HandleClosed)
	w.Send(parent, stamped("after", "v1", "after"))
	evs := w.WaitFor(parent, "after answered and settled", func(evs []wire.Event) bool {
		return harness.OutputCommitted("after")(evs) && settled(evs)
	})
	if !hasPrefix(harness.Outputs(evs), "child x (failed): child_unavailable: ") {
		w.t.Fatalf("parent outputs %q, want the failed result in the waiting turn", harness.Outputs(evs))
	}
	rec, snap := w.checkpoint(parent)
	if v, _ := wire.ReadStateVersion(rec.Checkpoint); v != 5 || len(snap.PendingSends) != 0 {
		w.t.Fatalf("checkpoint at state version %d with pending %+v, want 5 and none", v, snap.PendingSends)
	}
	if kids := w.children(parent); len(kids) != 0 {
		w.t.Fatalf("children %v were created", kids)
	}
	w.check(parent, evs, "")
}

// A cancel sent while the send is pending is applied at once (the
// delegated turn cancelled, the handle closed) and the next delivery is
// answered.
func TestChildSendPendingCancel(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.parentOwner("p1", time.Hour)
	w.ghost("gray")
	parent := w.start("v1")

	w.Send(parent, stamped("spawn", "v1", "/spawn x@gray hello"))
	w.WaitKind(parent, wire.EventChildStarted, 1)
	w.Send(parent, harness.WithID("cancel", harness.Control(wire.KindCancel)))
	evs := w.WaitEvents(parent, cancelBound, "the cancel applied while the child send is pending", func(evs []wire.Event) bool {
		return harness.Count(evs, wire.EventTurnCancelled) == 1
	})
	done := harness.FirstData[wire.ChildCompleted](t, evs, wire.EventChildCompleted)
	if done.Outcome != wire.ChildCancelled || done.TurnID != runtime.NoChildTurn {
		t.Fatalf("child.completed %+v, want cancelled with no child turn", done)
	}
	w.waitHandle(parent, "x", wire.HandleClosed)
	w.Send(parent, stamped("after", "v1", "after"))
	evs = w.WaitFor(parent, "after answered and settled", func(evs []wire.Event) bool {
		return harness.OutputCommitted("after")(evs) && settled(evs)
	})
	if _, snap := w.checkpoint(parent); len(snap.PendingSends) != 0 {
		t.Fatalf("pending after the cancel: %+v", snap.PendingSends)
	}
	w.check(parent, evs, "")
}

// Without a cancel, the delegation fails with child_unavailable once the
// timeout has passed since the delegation, and the waiting turn sees it.
func TestChildSendUnavailable(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second
	w := newWorld(t)
	w.parentOwner("p1", timeout)
	w.ghost("gray")
	parent := w.start("v1")

	w.Send(parent, stamped("spawn", "v1", "/spawn x@gray hello"))
	p := w.waitPending(parent)
	e := w.unavailable(parent)
	if e.Time.Before(p.Since.Add(timeout)) {
		t.Fatalf("failed at %v, before the timeout (since %v + %v)", e.Time, p.Since, timeout)
	}
	w.answered(parent)
}

// The pending send survives a restart of the parent's owner with its start
// time: the failure comes at start + timeout, not restart + timeout.
func TestChildSendUnavailableAcrossRestart(t *testing.T) {
	t.Parallel()
	const timeout = 10 * time.Second
	w := newWorld(t)
	p1 := w.parentOwner("p1", timeout)
	w.ghost("gray")
	parent := w.start("v1")

	w.Send(parent, stamped("spawn", "v1", "/spawn x@gray hello"))
	p := w.waitPending(parent)
	w.Check(p1.Stop())
	// The scenario, not a synchronisation: the owner is down for a while
	// before it comes back, half the timeout after the delegation.
	time.Sleep(time.Until(p.Since.Add(timeout / 2)))
	restart := time.Now()
	w.parentOwner("p1", timeout)
	e := w.unavailable(parent)
	if e.Time.Before(p.Since.Add(timeout)) || !e.Time.Before(restart.Add(timeout)) {
		t.Fatalf("failed at %v: want at or after start + timeout (%v), before restart + timeout (%v)",
			e.Time, p.Since.Add(timeout), restart.Add(timeout))
	}
	w.answered(parent)
}

// A delegation to a retired deployment fails at once (the step, with
// child_unavailable; no child, no pending send), and a send pending when
// its deployment is retired fails at once too — long before the timeout.
func TestChildSendRetired(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.parentOwner("p1", time.Hour)
	w.ghost("gray")
	w.ghost("old")
	_, _, err := w.Env.Store.RetireDeployment(w.Context(), "old")
	w.Check(err)
	parent := w.start("v1")

	w.Send(parent, stamped("old", "v1", "/spawn y@old hello"))
	evs := w.WaitFor(parent, "the delegation to a retired deployment failed", settled)
	errs := harness.AllData[wire.ErrorData](t, evs, wire.EventErrorKind)
	if len(errs) != 1 || errs[0].Code != wire.CodeChildUnavailable || !strings.Contains(errs[0].Message, "old is retired") {
		t.Fatalf("errors %+v, want one child_unavailable naming the retired deployment", errs)
	}
	if n := harness.Count(evs, wire.EventChildStarted); n != 0 {
		t.Fatalf("%d child.started for a retired deployment", n)
	}

	w.Send(parent, stamped("spawn", "v1", "/spawn x@gray hello"))
	w.waitPending(parent)
	_, _, err = w.Env.Store.RetireDeployment(w.Context(), "gray")
	w.Check(err)
	d := harness.FirstData[wire.ChildCompletedV2](t, []wire.Event{w.unavailable(parent)}, wire.EventChildCompleted)
	if !strings.Contains(d.Error.Message, "gray is retired") {
		t.Fatalf("error %+v, want the retirement named", d.Error)
	}
	w.answered(parent)
}

// A send to an existing child whose owners are down is stored and woken
// as before, not failed: the delegation waits past the child-send timeout
// and is answered once the child's deployment runs again.
func TestChildSendToExistingChildWaits(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second
	w := newWorld(t)
	w.parentOwner("p1", timeout)
	g1 := w.owner("gray", "g1")
	parent := w.start("v1")

	w.Send(parent, stamped("spawn", "v1", "/spawn x@gray hello"))
	w.WaitOutput(parent, "child x: hello")
	w.Check(g1.Stop())
	w.Send(parent, stamped("again", "v1", "/continue x again"))
	applied := w.WaitApplied(parent, "again")
	// The scenario, not a synchronisation: gray stays down past the
	// timeout, measured from the delegation's commit.
	e, _ := harness.Find(applied, harness.IsKind(wire.EventCommandApplied))
	time.Sleep(time.Until(e.Time.Add(2 * timeout)))
	if _, snap := w.checkpoint(parent); len(snap.PendingSends) != 0 {
		t.Fatalf("a send to an existing child is pending: %+v", snap.PendingSends)
	}
	w.owner("gray", "g1")
	evs := w.WaitFor(parent, "the existing child's answer", func(evs []wire.Event) bool {
		return harness.OutputCommitted("child x: again")(evs) && settled(evs)
	})
	for _, d := range harness.AllData[wire.ChildCompletedV2](t, evs, wire.EventChildCompleted) {
		if d.Outcome != wire.ChildDone || d.Error != nil {
			t.Fatalf("child.completed %+v, want every delegation done", d)
		}
	}
	if n := harness.Count(evs, wire.EventChildCompleted); n != 2 {
		t.Fatalf("%d child.completed, want 2", n)
	}
	w.check(parent, evs, "")
}
