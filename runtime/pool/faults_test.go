package pool

import (
	"fmt"
	"github.com/baton-rt/baton/internal/failpoint"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
)

// Every third commit lands but its reply is lost: each is settled by a
// leader read of the record (writer run + counter) as landed, so nothing is
// stranded, applied twice or published out of order.
func TestLostCommitRepliesAreSettled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var commits, lost atomic.Int64
	e.owner("v1", "p1", func(c *Config) {
		c.Failpoints = failpoint.New().On(failpoint.LoseCommitReply, failpoint.If(func() bool {
			if commits.Add(1)%3 == 0 {
				lost.Add(1)
				return true
			}
			return false
		}))
	})
	id := e.Start("v1").SessionID

	var want []string
	for i := range 12 {
		text := fmt.Sprintf("msg %d", i)
		switch i {
		case 4:
			// A multi-step turn of its own caller, steered by that caller.
			text = "/sleep 100ms"
			d := harness.Deliver(text)
			d.Caller = "carol"
			e.Send(id, d)
			want = append(want, text)
			text = "steer 4"
			s := harness.Steer(text)
			s.Caller = "carol"
			e.Send(id, s)
		default:
			e.Send(id, harness.Deliver(text))
		}
		want = append(want, text)
	}
	evs := e.WaitFor(id, "every delivery answered", func(evs []wire.Event) bool {
		return len(harness.Outputs(evs)) >= len(want)
	})
	applied := e.CheckStream(evs)
	if len(applied) != 13 {
		t.Fatalf("%d commands applied, want 13", len(applied))
	}
	if got := harness.Outputs(evs); !slices.Equal(got, want) {
		t.Fatalf("outputs %q, want %q", got, want)
	}
	if lost.Load() < 3 {
		t.Fatalf("only %d commit replies lost: the fault did not bite", lost.Load())
	}

	// The session keeps answering, and its record is still this run's.
	e.Send(id, harness.Deliver("still answering"))
	e.CheckStream(e.WaitOutput(id, "still answering"))
	cur, snap := e.session(id)
	if cur.Record.Epoch != 1 || cur.Record.Writer != cur.Record.OwnerRunID || snap.Writer.Write != cur.Record.WriteCounter {
		t.Fatalf("record %+v writer %+v", cur.Record, snap.Writer)
	}
}

// Every third commit CAS is never answered (a stream without a leader):
// the leader read finds the record still at the revision the commit
// expected, so the same CAS is sent again and lands. The session keeps its
// run and epoch — no re-claim — and nothing is lost or applied twice.
func TestDroppedCommitsAreSentAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var commits, dropped atomic.Int64
	e.owner("v1", "p1", func(c *Config) {
		c.Failpoints = failpoint.New().On(failpoint.DropCommit, failpoint.If(func() bool {
			if commits.Add(1)%3 == 0 {
				dropped.Add(1)
				return true
			}
			return false
		}))
	})
	id := e.Start("v1").SessionID
	var want []string
	for i := range 9 {
		text := fmt.Sprintf("msg %d", i)
		e.Send(id, harness.Deliver(text))
		want = append(want, text)
	}
	evs := e.WaitFor(id, "every delivery answered", func(evs []wire.Event) bool {
		return len(harness.Outputs(evs)) >= len(want)
	})
	if applied := e.CheckStream(evs); len(applied) != 9 {
		t.Fatalf("%d commands applied, want 9", len(applied))
	}
	if got := harness.Outputs(evs); !slices.Equal(got, want) {
		t.Fatalf("outputs %q, want %q", got, want)
	}
	if dropped.Load() < 3 {
		t.Fatalf("only %d commits dropped: the fault did not bite", dropped.Load())
	}
	cur, snap := e.session(id)
	if cur.Record.Epoch != 1 || cur.Record.Writer != cur.Record.OwnerRunID || snap.Writer.Write != cur.Record.WriteCounter {
		t.Fatalf("record %+v writer %+v: the session was re-claimed", cur.Record, snap.Writer)
	}
}

// An owner whose commit loses the CAS (a foreign write moved the record on)
// stops the session at once and publishes nothing more.
func TestCASConflictStopsWithoutSideEffects(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := e.owner("v1", "p1")
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("before"))
	before := e.WaitKind(id, wire.EventSessionWaiting, 1)

	// A foreign owner claims the record at its current revision.
	cur, _ := e.session(id)
	foreign := cur.Record
	foreign.OwnerRunID, foreign.Writer, foreign.Epoch = "foreign-run", "foreign-run", cur.Record.Epoch+1
	if _, err := e.Store.UpdateSession(t.Context(), foreign, cur.Revision); err != nil {
		t.Fatal(err)
	}

	e.Send(id, harness.Deliver("after"))
	e.Eventually(wait, "the owner to drop the session", func() bool {
		return !slices.Contains(o.Loaded(), id)
	})
	evs := e.Events(id)
	e.CheckStream(evs)
	if len(evs) != len(before) {
		t.Fatalf("events after the conflict: %s", harness.Kinds(evs[len(before):]))
	}
	// The foreign record still names p1, which does not run it: on a loaded
	// machine p1's sweeper may claim it afresh (a new run, a later epoch)
	// before this check, which is right. The fenced run never writes again.
	if now, _ := e.session(id); now.Record.Writer == cur.Record.Writer || now.Record.Epoch <= cur.Record.Epoch {
		t.Fatalf("the fenced owner wrote the record: %+v rev %d", now.Record, now.Revision)
	}
}
