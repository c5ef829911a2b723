package pool

import (
	"context"
	"encoding/json"
	"github.com/baton-rt/baton/internal/failpoint"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// A consumer that vanishes under a live session (deleted here; a server
// restart drops memory-storage consumers the same way) is recreated by the
// session at the lowest unapplied sequence — the record still names its run
// and epoch — and no command is lost or applied twice.
func TestLostConsumerIsRecreated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.Start("v1").SessionID
	e.Send(id, harness.WithID("one", harness.Deliver("one")))
	e.WaitOutput(id, "one")
	cur, _ := e.session(id)
	if err := e.JS.DeleteConsumer(t.Context(), e.Names.InboxStream(), cur.Record.Consumer); err != nil {
		t.Fatal(err)
	}
	e.Send(id, harness.WithID("two", harness.Deliver("two")))
	evs := e.WaitOutput(id, "two")
	if applied := e.Applied(evs); len(applied) != 2 || applied[1].CommandID != "two" {
		t.Fatalf("applied %+v", applied)
	}
	e.CheckStream(evs)
	if now, _ := e.session(id); now.Record.Epoch != cur.Record.Epoch || !e.ConsumerExists(cur.Record.Consumer) {
		t.Fatalf("after the loss: record %+v, consumer %s exists %v", now.Record, cur.Record.Consumer, e.ConsumerExists(cur.Record.Consumer))
	}
}

// A session whose consumer is deleted by a successor (the record names
// another run) stops without a side effect and never recreates the
// consumer of its old epoch.
func TestTakenSessionStopsWhenItsConsumerGoes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := e.owner("v1", "p1")
	id := e.Start("v1").SessionID
	e.Send(id, harness.WithID("one", harness.Deliver("one")))
	before := e.WaitKind(id, wire.EventSessionWaiting, 1)
	cur, _ := e.session(id)
	foreign := cur.Record
	foreign.OwnerRunID, foreign.Writer, foreign.Epoch, foreign.OwnerProcess = "foreign-run", "foreign-run", cur.Record.Epoch+1, "p9"
	if _, err := e.Store.UpdateSession(t.Context(), foreign, cur.Revision); err != nil {
		t.Fatal(err)
	}
	if err := e.JS.DeleteConsumer(t.Context(), e.Names.InboxStream(), cur.Record.Consumer); err != nil {
		t.Fatal(err)
	}
	e.Eventually(wait, "the owner to drop the session", func() bool { return !slices.Contains(o.Loaded(), id) })
	time.Sleep(200 * time.Millisecond)
	if e.ConsumerExists(cur.Record.Consumer) {
		t.Fatal("the stale owner recreated its old epoch's consumer")
	}
	if evs := e.Events(id); len(evs) != len(before) {
		t.Fatalf("events after the takeover: %s", harness.Kinds(evs[len(before):]))
	}
	// The record names p9, a process without a lease: on a loaded machine
	// the sweeper may adopt the session before this check (a new run at a
	// later epoch), which is right. The stale run itself never writes again.
	if now, _ := e.session(id); now.Record.Writer == cur.Record.Writer || now.Record.Epoch <= cur.Record.Epoch {
		t.Fatalf("the stale owner wrote the record: %+v", now.Record)
	}
}

// A timer re-armed by a later owner (a handoff successor re-arms with the
// original duration under its own timer ID) makes the earlier one
// harmless: a timeout carrying the earlier ID is applied and ignored, and
// the session ends once, when the later timer fires.
func TestRearmedTimerMakesEarlierHarmless(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.owner("v1", "p1")
	// The second owner must hold its lease and take the session over
	// before the first timer fires: under two make tests at once its lease
	// alone took 4 s, so the timeout leaves room for that.
	const timeout = 10 * time.Second
	id := e.StartWith(protocol.StartRequest{DeploymentID: "v1", Timeout: timeout.String()}).SessionID
	e.WaitKind(id, wire.EventSessionStarted, 1)
	_, snap := e.session(id)
	earlier := snap.Timer
	if earlier == nil {
		t.Fatal("no timer armed")
	}

	second := e.owner("v1", "p2")
	e.Eventually(wait, "p2 to hold its lease", second.lease.valid)
	if err := second.Load(t.Context(), id, runtime.BootHandoff); err != nil {
		t.Fatal(err)
	}
	rearmed := time.Now()
	e.Eventually(wait, "the first owner to let go", func() bool { return !slices.Contains(first.Loaded(), id) })
	// The successor's boot commit (which re-arms) may land after the first
	// owner let go: wait for a commit of the new run.
	var cur record.Session
	e.Eventually(wait, "the successor's boot commit", func() bool {
		cur, snap = e.session(id)
		return cur.Record.Writer == cur.Record.OwnerRunID && cur.Record.WriteCounter > 0
	})
	if snap.Timer == nil || snap.Timer.ID == earlier.ID || snap.Timer.ID != cur.Record.OwnerRunID || snap.Timer.Duration != earlier.Duration {
		t.Fatalf("timer after the re-arm %+v, earlier %+v", snap.Timer, earlier)
	}
	// The earlier timer's wake (as if it fired before it was replaced).
	e.Send(id, harness.WithID("stale", harness.Timeout(earlier.ID)))
	e.Send(id, harness.WithID("alive", harness.Deliver("still alive")))
	e.WaitOutput(id, "still alive")
	if evs := e.Events(id); harness.Count(evs, wire.EventSessionEnded) != 0 {
		t.Fatalf("the earlier timer ended the session: %s", harness.Kinds(evs))
	}
	evs := e.WaitKind(id, wire.EventSessionEnded, 1)
	if since := time.Since(rearmed); since < timeout-time.Second {
		t.Fatalf("ended %v after the re-arm, before the later timer's %v", since, timeout)
	}
	e.CheckStream(evs)
	if _, ok := harness.AppliedIDs(evs)["timeout-"+snap.Timer.ID]; !ok {
		t.Fatalf("not ended by the later timer: applied %v", e.Applied(evs))
	}
	if end := harness.FirstData[wire.SessionEnded](t, evs, wire.EventSessionEnded); end.Reason != wire.EndExpired {
		t.Fatalf("ended %+v", end)
	}
	e.waitEnded(id)
}

// Renewals whose replies are lost (they landed) are settled by reading the
// lease back — this run's instance at a newer revision — not taken for a
// lost lease: the process never fences, so its session keeps its epoch.
func TestLostLeaseRenewalRepliesAreSettled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var renewals, lost atomic.Int64
	e.owner("v1", "p1", func(c *Config) {
		c.LeaseTTL, c.LeaseRenew = 2*time.Second, 300*time.Millisecond
		c.Failpoints = failpoint.New().On(failpoint.LoseLeaseReply, failpoint.If(func() bool {
			if renewals.Add(1)%2 == 0 {
				lost.Add(1)
				return true
			}
			return false
		}))
	})
	id := e.Start("v1").SessionID
	for i := range 8 {
		text := "msg " + string(rune('a'+i))
		e.Send(id, harness.Deliver(text))
		e.WaitOutput(id, text)
		time.Sleep(300 * time.Millisecond)
	}
	if lost.Load() < 3 {
		t.Fatalf("only %d renewal replies lost", lost.Load())
	}
	if cur, _ := e.session(id); cur.Record.Epoch != 1 {
		t.Fatalf("the session was re-claimed (epoch %d): the process fenced itself", cur.Record.Epoch)
	}
	e.CheckStream(e.Events(id))
}

// A process whose lease key is taken over while it runs fences itself at
// once: its sessions stop, and it serves again only after re-acquiring the
// key, resuming its sessions by fresh claims.
func TestTakenLeaseFencesAndResumes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := e.owner("v1", "p1")
	id := e.Start("v1").SessionID
	e.Send(id, harness.WithID("one", harness.Deliver("one")))
	e.WaitOutput(id, "one")
	before, _ := e.session(id)

	// Another process writes the key (as a takeover would), without a TTL
	// so it stays until the test deletes it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	owners, err := e.JS.KeyValue(ctx, e.Names.OwnersBucket())
	if err != nil {
		t.Fatal(err)
	}
	taken, _ := json.Marshal(kv.Lease{ProcessID: "p1", Holder: "p9", TakenAt: time.Now().UTC()})
	if _, err := owners.Put(ctx, subjects.LeaseKey("p1"), taken); err != nil {
		t.Fatal(err)
	}
	e.Eventually(wait, "the owner to fence and drop the session", func() bool { return !slices.Contains(o.Loaded(), id) })
	time.Sleep(300 * time.Millisecond)
	if slices.Contains(o.Loaded(), id) {
		t.Fatal("the session runs again while the lease key is held by another process")
	}
	// The holder lets go; the owner re-acquires and resumes.
	if err := owners.Delete(ctx, subjects.LeaseKey("p1")); err != nil {
		t.Fatal(err)
	}
	e.Eventually(wait, "the session to run again", func() bool { return slices.Contains(o.Loaded(), id) })
	e.Send(id, harness.WithID("two", harness.Deliver("two")))
	evs := e.WaitOutput(id, "two")
	e.CheckStream(evs)
	if now, _ := e.session(id); now.Record.Epoch != before.Record.Epoch+1 || now.Record.OwnerProcess != "p1" {
		t.Fatalf("record after the fence %+v, before %+v", now.Record, before.Record)
	}
}
