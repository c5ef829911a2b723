package durability_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// SIGTERM drains an owner process: it takes no new work, lets the running
// step finish and commit (it never runs again), hibernates every session,
// releases its lease and exits 0. Its sessions' next commands are run by
// its peer, loaded on demand.
func TestSIGTERMDrains(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.owner("a", "--drain-timeout", "20s", "--hibernate-after", "1h")
	idle := c.start(protocol.StartRequest{})
	busy := c.start(protocol.StartRequest{})
	c.send(idle, harness.Deliver("hello"))
	c.waitOutput(idle, "hello")
	c.owner("b", "--hibernate-after", "1h")
	c.send(busy, harness.Deliver("/sleep 1500ms"))
	c.waitExec(busy, "t1/1", "a")

	if err := a.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := a.Wait(t, wait); code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, harness.LastLines(a.Output(), 30))
	}
	if harness.LogCount(a, "drained: every session hibernated") != 1 {
		t.Fatalf("no complete drain logged\n%s", harness.LastLines(a.Output(), 30))
	}
	for _, id := range []string{idle, busy} {
		if rec := c.record(id); rec.OwnerProcess == "a" && rec.State != record.StateHibernated {
			t.Fatalf("session %s left active on the drained process: %+v", id, rec)
		}
	}
	evs := c.waitKind(busy, wire.EventTurnCompleted, 1)
	c.checkCommittedStepsRanOnce(busy, evs)
	if runs := c.runs(busy)["t1/1"]; len(runs) != 1 || runs[0] != "a" {
		t.Fatalf("the running step: %v, want once on a", runs)
	}
	for _, id := range []string{idle, busy} {
		c.send(id, harness.Deliver("after "+id))
		c.wake(id)
		evs := c.waitOutput(id, "after "+id)
		checkStream(t, evs)
		c.checkCommittedStepsRanOnce(id, evs)
		if rec := c.record(id); rec.OwnerProcess != "b" {
			t.Fatalf("session %s after its next command: %+v", id, rec)
		}
	}
}

// A second signal aborts the drain: the process dies at once, its running
// step uncommitted, and the peer takes the session over by lease expiry and
// runs that step again (the at-least-once boundary).
func TestSecondSignalAborts(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.owner("a", "--drain-timeout", "1m")
	id := c.start(protocol.StartRequest{})
	c.owner("b")
	c.send(id, harness.Deliver("/sleep 20s"))
	c.waitExec(id, "t1/1", "a")
	if err := a.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	c.waitLogCount(a, "draining: no new work; hibernating every session", 1)
	if err := a.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := a.Wait(t, 10*time.Second); code == 0 {
		t.Fatalf("exit code 0 after a second signal: the drain was not aborted\n%s", harness.LastLines(a.Output(), 20))
	}
	c.waitOwner(id, "b")
	c.waitExec(id, "t1/1", "b")
}

// SIGHUP drains like SIGTERM (a closed terminal, a supervisor's reload
// signal): the running step commits, every session hibernates, the lease
// is released and the process exits 0. So a process started again with the
// same process ID takes its lease at once instead of waiting out its TTL,
// and serves the sessions' next commands.
func TestSIGHUPDrains(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.owner("a", "--drain-timeout", "20s", "--hibernate-after", "1h")
	id := c.start(protocol.StartRequest{})
	c.send(id, harness.Deliver("/sleep 1500ms"))
	c.waitExec(id, "t1/1", "a")

	if err := a.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if code := a.Wait(t, wait); code != 0 {
		t.Fatalf("exit code %d after SIGHUP\n%s", code, harness.LastLines(a.Output(), 30))
	}
	for _, line := range []string{"drained: every session hibernated", "lease released"} {
		if harness.LogCount(a, line) != 1 {
			t.Fatalf("%q not logged once after SIGHUP\n%s", line, harness.LastLines(a.Output(), 30))
		}
	}
	if rec := c.record(id); rec.State != record.StateHibernated || rec.OwnerProcess != "" && rec.OwnerProcess != "a" {
		t.Fatalf("session after the SIGHUP drain: %+v", rec)
	}
	c.waitKind(id, wire.EventTurnCompleted, 1)

	again := c.owner("a", "--hibernate-after", "1h")
	again.WaitLog(t, "lease acquired", wait)
	if n := harness.LogCount(again, "lease key is live; waiting for it to expire"); n != 0 {
		t.Fatalf("the restarted process waited out its own lease: the drain did not release it\n%s", harness.LastLines(again.Output(), 30))
	}
	c.send(id, harness.Deliver("after the restart"))
	c.wake(id)
	evs := c.waitOutput(id, "after the restart")
	checkStream(t, evs)
	c.checkCommittedStepsRanOnce(id, evs)
	if runs := c.runs(id)["t1/1"]; len(runs) != 1 || runs[0] != "a" {
		t.Fatalf("the step running at SIGHUP: %v, want once on a", runs)
	}
	if rec := c.record(id); rec.OwnerProcess != "a" {
		t.Fatalf("session after its next command: %+v", rec)
	}
}
