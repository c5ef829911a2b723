package durability_test

import (
	"testing"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
)

// An owner process SIGKILLed between a session's state change (its
// hibernation's record CAS) and that change's index write: the session
// index still says active; the next reconcile of a peer derives the entry
// from the record and heals it.
func TestKillBeforeIndexWrite(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	// Index write 1: the first commit (active); 2: the hibernation.
	a := c.owner("a", "--fault", "crash-before-index-write:2", "--hibernate-after", "300ms", "--index-reconcile-every", "0")
	id := c.start(protocol.StartRequest{})
	x, err := kv.OpenIndex(t.Context(), c.JS, c.Names)
	c.h.Check(err)
	c.eventually("the first index write", func() bool {
		e, _, err := x.Get(t.Context(), id)
		return err == nil && e.State == record.StateActive && !e.CreatedAt.IsZero()
	})
	a.Wait(t, wait) // the fault killed it
	if !a.Contains("fault injected: killing this process") {
		t.Fatalf("a exited without the fault:\n%s", a.Output())
	}
	rec := c.record(id)
	if e, _, err := x.Get(t.Context(), id); err != nil || rec.State != record.StateHibernated || e.State != record.StateActive {
		t.Fatalf("after the kill: record %s, entry %+v (%v); want hibernated and a stale active entry", rec.State, e, err)
	}
	created := func() record.IndexEntry { e, _, _ := x.Get(t.Context(), id); return e }().CreatedAt

	c.owner("b", "--index-reconcile-every", "200ms")
	c.eventually("the reconciler heals the entry", func() bool {
		e, _, err := x.Get(t.Context(), id)
		return err == nil && e.State == record.StateHibernated && e.Writer == "reconcile-b" && e.CreatedAt.Equal(created)
	})
	p, err := x.List(t.Context(), kv.IndexQuery{State: "hibernated"}, "", 10)
	if err != nil || len(p.Entries) != 1 || p.Entries[0].SessionID != id {
		t.Fatalf("state=hibernated listing: %+v %v", p, err)
	}
	if p, err := x.List(t.Context(), kv.IndexQuery{State: "active"}, "", 10); err != nil || len(p.Entries) != 0 {
		t.Fatalf("state=active listing after the heal: %+v %v", p, err)
	}
}
