package pool

import (
	"github.com/baton-rt/baton/internal/failpoint"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
)

// A process whose lease renewals fail past its fence deadline, but not
// past the server's expiry (as while the bucket elects a new leader),
// pauses instead of fencing: no session performs an effect,
// and when a renewal lands every session goes on where it stood.
//
//   - A step in flight across the pause runs once and commits: no fence,
//     no re-claim (the same run and epoch), no re-run.
//   - A delivery to an idle session during a pause is not applied while
//     the pause lasts (the record does not move), and is applied once
//     after it.
func TestLeasePauseGoesOn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var fail atomic.Bool
	// TTL 8 s: renewals every 2 s, the pause 6 s after the last landed
	// one, the server's expiry no earlier than 8 s after it; the test
	// ends each pause within half a second.
	p1 := e.owner("v1", "p1", func(c *Config) {
		c.LeaseTTL = 8 * time.Second
		c.Failpoints = failpoint.New().On(failpoint.FailLeaseRenewal, failpoint.If(fail.Load))
	})
	id := e.Start("v1").SessionID
	pause := func(n uint64) {
		t.Helper()
		fail.Store(true)
		e.Eventually(wait, "the process paused", func() bool { return p1.Stats().Pauses >= n })
	}

	// A step in flight across a pause.
	step := harness.Deliver("/sleep 9s")
	step.ID = "the-step"
	e.Send(id, step)
	e.Eventually(wait, "the step runs", func() bool { return len(firstStepRuns(e, id)) == 1 })
	before, _ := e.session(id)
	pause(1)
	time.Sleep(300 * time.Millisecond) // a while paused, the step still running
	fail.Store(false)
	e.WaitKind(id, wire.EventTurnCompleted, 1)
	after, _ := e.session(id)
	if runs := firstStepRuns(e, id); len(runs) != 1 {
		t.Fatalf("the step ran %v: want once across the pause", e.stepRuns(id))
	}
	if after.Record.OwnerRunID != before.Record.OwnerRunID || after.Record.Epoch != before.Record.Epoch {
		t.Fatalf("re-claimed across the pause: run %s epoch %d, then run %s epoch %d",
			before.Record.OwnerRunID, before.Record.Epoch, after.Record.OwnerRunID, after.Record.Epoch)
	}

	// A delivery to the idle session during a pause.
	pause(2)
	still := e.Record(id)
	mid := harness.Deliver("during the pause")
	mid.ID = "mid"
	e.Send(id, mid)
	time.Sleep(500 * time.Millisecond) // the session has it; the commit waits
	if cur := e.Record(id); cur.Revision != still.Revision {
		t.Fatalf("the record moved during the pause: revision %d → %d", still.Revision, cur.Revision)
	}
	fail.Store(false)
	evs := e.WaitKind(id, wire.EventTurnCompleted, 2)
	e.CheckStream(evs)
	all, err := harness.Applied(evs)
	e.Check(err)
	if len(all) != 2 || all[0].CommandID != step.ID || all[1].CommandID != mid.ID {
		t.Fatalf("applied %+v: want %s then %s, once each", all, step.ID, mid.ID)
	}
	if st := p1.Stats(); st.Fences != 0 || st.Pauses != 2 {
		t.Fatalf("stats: %d fences, %d pauses: want 0 and 2", st.Fences, st.Pauses)
	}
	if cur, _ := e.session(id); cur.Record.OwnerRunID != before.Record.OwnerRunID {
		t.Fatalf("re-claimed after the second pause: run %s", cur.Record.OwnerRunID)
	}
}

// A pause that outlasts the lease ends in a fence: the server expires the
// key, the watch (or the next renewal's read-back) shows it gone, and the
// process stops every session, acquires a new lease once renewals work
// again and re-claims its session by a fresh run; a delivery sent during
// the pause is applied once.
func TestLeasePauseExpiresAndFences(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var fail atomic.Bool
	p1 := e.owner("v1", "p1", func(c *Config) {
		c.Failpoints = failpoint.New().On(failpoint.FailLeaseRenewal, failpoint.If(fail.Load))
	}) // LeaseTTL 4 s
	id := e.Start("v1").SessionID
	before := e.Record(id)
	fail.Store(true)
	e.Eventually(wait, "the process paused", func() bool { return p1.Stats().Pauses >= 1 })
	mid := harness.Deliver("during the pause")
	mid.ID = "mid"
	e.Send(id, mid)
	e.Eventually(wait, "the process fenced once its lease expired", func() bool { return p1.Stats().Fences >= 1 })
	fail.Store(false)
	evs := e.WaitKind(id, wire.EventTurnCompleted, 1)
	e.CheckStream(evs)
	all, err := harness.Applied(evs)
	e.Check(err)
	if len(all) != 1 || all[0].CommandID != mid.ID {
		t.Fatalf("applied %+v: want %s once", all, mid.ID)
	}
	if cur := e.Record(id); cur.Record.OwnerRunID == before.Record.OwnerRunID || cur.Record.OwnerProcess != "p1" {
		t.Fatalf("after the fence: run %s of %s, want a fresh run of p1 (was %s)", cur.Record.OwnerRunID, cur.Record.OwnerProcess, before.Record.OwnerRunID)
	}
}
