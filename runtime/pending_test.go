package runtime_test

import (
	"slices"
	"testing"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// pendingParent is a parent whose waiting turn delegated to a new handle
// h, and whose driver reported the child-creating send pending (no live
// owner of the child's deployment).
func pendingParent(t *testing.T) (*cdriver, runtime.Send, []runtime.Effect) {
	t.Helper()
	p, effs := delegated(t, true, runtime.OutcomeContinue)
	sends := sendsOf(effs)
	if len(sends) != 1 || sends[0].Alias == "" {
		t.Fatalf("sends %+v, want the child-creating delegation", sends)
	}
	return p, sends[0], p.in(runtime.SendsPending{Sends: sends})
}

func commits(effs []runtime.Effect) []runtime.Commit {
	var out []runtime.Commit
	for _, e := range effs {
		if c, ok := e.(runtime.Commit); ok {
			out = append(out, c)
		}
	}
	return out
}

// A pending send is committed (pendingSends, its start the delegation's
// acceptance) and stays across later commits and a reboot, which does not
// send it again with the last commit's sends: the driver retries it by
// itself.
func TestPendingSendSurvivesCommitsAndBoot(t *testing.T) {
	p, s, effs := pendingParent(t)
	cs := commits(effs)
	if len(cs) != 1 || len(cs[0].Snapshot.PendingSends) != 1 {
		t.Fatalf("commits %+v, want one carrying the pending send", cs)
	}
	ps := p.committed.PendingSends[0]
	if ps.Send.Command.ID != s.Command.ID || !ps.Since.Equal(epoch) || ps.Send.Alias != s.Alias {
		t.Fatalf("pending %+v, want the delegation since %v", ps, epoch)
	}
	if len(sendsOf(effs)) != 0 {
		t.Fatalf("the pending send was sent again: %+v", sendsOf(effs))
	}
	// Reported again (a boot's re-send that failed too): kept once.
	if effs := p.in(runtime.SendsPending{Sends: []runtime.Send{s}}); len(commits(effs)) != 0 || len(p.m.PendingSends()) != 1 {
		t.Fatalf("a repeated report changed the state: %v, %+v", effs, p.m.PendingSends())
	}
	p.recv(runtime.Command{Kind: runtime.KindPause})
	p.recv(runtime.Command{Kind: runtime.KindResume})
	if got := p.committed.PendingSends; len(got) != 1 || got[0].Send.Command.ID != s.Command.ID {
		t.Fatalf("after two commits: pending %+v", got)
	}
	snap := p.committed
	snap.Sends = []runtime.Send{s} // as if the staging commit were the last
	m, err := runtime.NewMachine(runtime.Config{SessionID: "p", RunID: "r2", Deployment: "A"}, snap)
	if err != nil {
		t.Fatal(err)
	}
	effs, err = m.Handle(runtime.Boot{Now: epoch.Add(time.Minute), Reason: runtime.BootRecover})
	if err != nil {
		t.Fatal(err)
	}
	if sent := sendsOf(effs); len(sent) != 0 {
		t.Fatalf("boot re-sent the pending send with the last commit's: %+v", sent)
	}
	if got := m.PendingSends(); len(got) != 1 || !got[0].Since.Equal(epoch) {
		t.Fatalf("after boot: pending %+v, want the one since %v", got, epoch)
	}
}

// A send that left is dropped (the checkpoint goes back to no pending
// send); a report for a send no active handle waits for, or one that
// creates no child, is ignored.
func TestPendingSendLeftOrStale(t *testing.T) {
	p, s, _ := pendingParent(t)
	effs := p.in(runtime.SendsLeft{IDs: []string{s.Command.ID}})
	if len(commits(effs)) != 1 || len(p.committed.PendingSends) != 0 {
		t.Fatalf("after SendsLeft: commits %d, pending %+v", len(commits(effs)), p.committed.PendingSends)
	}
	if h := p.handle("h"); h.State != wire.HandleActive || h.CommandID != s.Command.ID {
		t.Fatalf("handle %+v, want still active: the child works on it", h)
	}
	if effs := p.in(runtime.SendsLeft{IDs: []string{s.Command.ID}}); len(effs) != 0 {
		t.Fatalf("a repeated SendsLeft: %v", effs)
	}
	plain := s
	plain.Alias, plain.DeploymentID = "", ""
	stale := s
	stale.Command.ID = "p/t9/1/delegate"
	if effs := p.in(runtime.SendsPending{Sends: []runtime.Send{plain, stale}}); len(effs) != 0 || len(p.m.PendingSends()) != 0 {
		t.Fatalf("kept %+v (effects %v)", p.m.PendingSends(), effs)
	}
}

// A cancel while the send is pending is applied at once: the delegated
// turn is cancelled, the pending send dropped, the handle closed
// (child.completed cancelled with no child turn, child.closed, an end for
// a child a creation in flight may have made) and no cancel is sent to a
// child that does not exist; the next delivery starts a turn.
func TestPendingSendCancelled(t *testing.T) {
	p, s, _ := pendingParent(t)
	effs := p.recv(runtime.Command{Kind: runtime.KindCancel})
	if n := len(eventsOf(effs, runtime.EventTurnCancelled)); n != 1 {
		t.Fatalf("%d turn.cancelled", n)
	}
	done := eventsOf(effs, runtime.EventChildCompleted)
	if len(done) != 1 || done[0]["outcome"] != wire.ChildCancelled || done[0]["turnId"] != runtime.NoChildTurn || done[0]["error"] != nil {
		t.Fatalf("child.completed %v, want one cancelled with no child turn", done)
	}
	if n := len(eventsOf(effs, runtime.EventChildClosed)); n != 1 {
		t.Fatalf("%d child.closed", n)
	}
	if h := p.handle("h"); h.State != wire.HandleClosed {
		t.Fatalf("handle %+v, want closed", h)
	}
	if len(p.committed.PendingSends) != 0 || len(p.m.PendingSends()) != 0 {
		t.Fatalf("pending after the cancel: %+v", p.committed.PendingSends)
	}
	if c := sendsOfKind(effs, runtime.KindCancel); len(c) != 0 {
		t.Fatalf("a cancel sent to a child never created: %+v", c)
	}
	if e := sendsOfKind(effs, runtime.KindEnd); len(e) != 1 || e[0].SessionID != s.SessionID {
		t.Fatalf("end sends %+v, want one to %s", e, s.SessionID)
	}
	if r := p.m.IdleReason(); r != "" {
		t.Fatalf("IdleReason %q after the cancel", r)
	}
	if rs := runs(p.deliver("after")); len(rs) != 1 {
		t.Fatalf("the next delivery ran %d steps", len(rs))
	}
}

// The driver's failure for a send past its timeout — a failed child.result
// with child_unavailable — closes the handle, drops the pending send,
// records child.completed at data version 2 with the error, and re-opens
// the waiting turn with the failed result as its input.
func TestPendingSendUnavailable(t *testing.T) {
	p, s, _ := pendingParent(t)
	h := p.handle("h")
	msg := "no owner of deployment A created the child within 1m0s"
	effs := p.recv(runtime.Command{Kind: runtime.KindChildResult, Child: &wire.ChildRef{
		Handle: h.Handle, SessionID: h.ChildSessionID, CommandID: h.CommandID, TurnID: runtime.NoChildTurn,
		Outcome: wire.ChildFailed, Error: wire.ChildErrorText(wire.CodeChildUnavailable, msg), Ended: "unavailable",
	}})
	var ev runtime.Event
	for _, e := range events(effs) {
		if e.Kind == runtime.EventChildCompleted {
			ev = e
		}
	}
	want := `{"childSessionId":"` + s.SessionID + `","error":{"code":"child_unavailable","message":"` + msg + `"},"handle":"h","outcome":"failed","turnId":"none"}`
	if ev.V != 2 || string(ev.Data) != want {
		t.Fatalf("child.completed v%d %s\nwant v2 %s", ev.V, ev.Data, want)
	}
	if got := p.handle("h"); got.State != wire.HandleClosed {
		t.Fatalf("handle %+v, want closed", got)
	}
	if len(p.committed.PendingSends) != 0 {
		t.Fatalf("pending %+v", p.committed.PendingSends)
	}
	rs := runs(effs)
	if len(rs) != 1 || len(rs[0].Input.Inputs) != 1 {
		t.Fatalf("runs %+v, want the waiting turn re-opened", rs)
	}
	in := rs[0].Input.Inputs[0]
	if in.Kind != runtime.KindChildResult || in.Child.Outcome != wire.ChildFailed || in.Child.Error == "" {
		t.Fatalf("the step's input %+v", in)
	}
	// A child's own failed result stays at data version 1.
	q, _ := delegated(t, true, runtime.OutcomeContinue)
	r := result(q.handle("h"))
	r.Child.Outcome, r.Child.Error = wire.ChildFailed, "step_timeout: slow"
	for _, e := range events(q.recv(r)) {
		if e.Kind == runtime.EventChildCompleted && (e.V > 1 || slices.Contains([]string{"error"}, string(e.Data))) {
			t.Fatalf("child.completed v%d %s for a child's own failure", e.V, e.Data)
		}
	}
}

// Closing a handle (here by reset) drops its pending send.
func TestPendingSendDroppedByReset(t *testing.T) {
	p, _, _ := pendingParent(t)
	p.recv(runtime.Command{Kind: runtime.KindReset})
	if len(p.committed.PendingSends) != 0 || p.handle("h").State != wire.HandleClosed {
		t.Fatalf("after reset: pending %+v, handle %+v", p.committed.PendingSends, p.handle("h"))
	}
}
