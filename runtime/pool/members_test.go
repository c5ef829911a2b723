package pool

import (
	"github.com/baton-rt/baton/internal/failpoint"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
)

// A record holding members this build does not know (a later build's
// write) keeps them through every write path of an owner: a claim (a
// wake), commits, a hibernation, a fenced run's release, a quarantine, and
// an operator's end: its request, the finisher's claim and the end.
// Each path rewrites the whole record, so a member dropped by any of them
// could not come back.
func TestRecordKeepsLaterMembers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const later = record.Members(`"agentId":"later","tags":{"team":"a b"}`)
	p1 := e.owner("v1", "p1", hibernating(100*time.Millisecond, 0))
	id := e.Start("v1").SessionID
	check := func(what string) record.Session {
		t.Helper()
		cur := e.Record(id)
		if cur.Record.Extra != later {
			t.Fatalf("after %s: the record keeps %q, want %q", what, cur.Record.Extra, later)
		}
		return cur
	}
	e.Send(id, harness.Deliver("hello"))
	e.WaitOutput(id, "hello")
	cur := e.waitHibernated(id)
	rec := cur.Record
	rec.Extra = later
	if _, err := e.Store.UpdateSession(t.Context(), rec, cur.Revision); err != nil {
		t.Fatal(err)
	}
	e.waitRechecked(p1.Owner, id)

	// A claim by a wake, the commits of a turn, a hibernation.
	e.Send(id, harness.Deliver("again"))
	e.Wake("v1", id)
	e.WaitOutput(id, "again")
	if cur := e.waitHibernated(id); cur.Record.Epoch != rec.Epoch+1 {
		t.Fatalf("epoch %d → %d: want one claim", rec.Epoch, cur.Record.Epoch)
	}
	check("a claim, a turn's commits and a hibernation")
	e.Check(p1.Stop())

	// A run fenced by its lease, released by its process.
	var frozen atomic.Bool
	p2 := e.owner("v1", "p2", func(c *Config) {
		c.LeaseTTL = 3 * time.Second
		c.Failpoints = failpoint.New().On(failpoint.HoldLeaseRenewal, failpoint.If(frozen.Load))
	})
	e.Send(id, harness.Deliver("third"))
	e.Wake("v1", id)
	e.WaitOutput(id, "third")
	frozen.Store(true)
	e.WaitRecord(id, func(r record.SessionRecord) bool {
		return r.OwnerRunID == "" && strings.HasPrefix(r.Writer, "fenced-")
	})
	check("a fenced run's release")
	e.Check(p2.Stop())

	// A quarantine: the next boot cannot read the checkpoint.
	e.breakCheckpoint(id)
	p3 := e.owner("v1", "p3", quarantining(1))
	e.Wake("v1", id)
	e.waitQuarantined(id)
	cur = check("a quarantine")

	// An operator's end: the request (the ingress's intent write), the
	// finisher's claim and the end it writes.
	if _, err := e.Store.RequestFinish(t.Context(), cur, record.FinishRequest{Op: record.FinishEnd, By: "admin-1", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	check("a finish request")
	if rep := p3.Owner.Finish(t.Context(), id, false); rep.Error != nil || rep.Outcome != "ended" {
		t.Fatalf("finish = %+v", rep)
	}
	if done := check("a finish's claim and end"); !done.Record.Terminated() {
		t.Fatalf("record after the finish: %+v", done.Record)
	}
}
