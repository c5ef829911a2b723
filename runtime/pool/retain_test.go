package pool

import (
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// TestRetainEnded: with --retain-ended, an owner's sweep deletes a
// session that ended that long ago — found in the session index, its
// events purged, its record a tombstone with reason retention — and
// counts it in baton_owner_sessions_deleted_total{reason="retention"};
// a session that lives (loaded or hibernated) is kept, however old.
func TestRetainEnded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const keep = 1500 * time.Millisecond
	reg := prometheus.NewRegistry()
	e.owner("v1", "p1", func(c *Config) {
		c.RetainEnded, c.HibernateAfter, c.SweepInterval, c.Registerer = keep, 300*time.Millisecond, 200*time.Millisecond, reg
	})
	done := e.Start("v1").SessionID
	idle := e.Start("v1").SessionID
	e.Send(done, harness.Deliver("/done"))
	e.Send(idle, harness.Deliver("hello"))
	e.WaitKind(done, wire.EventSessionEnded, 1)
	ended := e.Record(done).Record.UpdatedAt
	var tomb record.SessionRecord
	e.Eventually(10*time.Second, "the ended session deleted", func() bool {
		tomb = e.Record(done).Record
		return tomb.IsDeleted()
	})
	if tomb.Deleted.Reason != record.DeleteByRetention || tomb.Deleted.At.Sub(ended) < keep || tomb.Deleted.Removed.Events == 0 {
		t.Fatalf("tombstone %+v after the end at %v, want reason retention at least %v later", tomb.Deleted, ended, keep)
	}
	if evs := e.Events(done); len(evs) != 0 {
		t.Fatalf("%d events of the deleted session stay", len(evs))
	}
	e.Eventually(10*time.Second, "the idle session hibernated", func() bool { return e.Record(idle).Record.State == record.StateHibernated })
	time.Sleep(2 * keep)
	if r := e.Record(idle).Record; r.IsDeleted() || r.State != record.StateHibernated {
		t.Fatalf("the live session was touched: %s, deleted %v", r.State, r.IsDeleted())
	}
	if got := gather(t, reg)[`baton_owner_sessions_deleted_total{reason="retention"}`]; got != 1 {
		t.Fatalf("baton_owner_sessions_deleted_total{reason=retention} = %v, want 1", got)
	}
}
