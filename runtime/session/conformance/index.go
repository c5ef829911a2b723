package conformance

import (
	"testing"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/session"
)

// IndexTarget is a session.Index and a way to read back what it holds.
type IndexTarget struct {
	Index session.Index
	// Get reads a session's entry (false: none).
	Get func(t *testing.T, sessionID string) (record.IndexEntry, bool)
}

// Index runs the session index suite: an entry derived from an older
// record revision never replaces a newer one; a zero creation time keeps
// the stored one; storage news adds up; a recount replaces it.
func Index(t *testing.T, open func(t *testing.T) IndexTarget) {
	t.Run("newer revision wins", func(t *testing.T) {
		ctx, x := ctxOf(t), open(t)
		id := tokens(1)[0]
		created := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
		e := record.IndexEntry{SessionID: id, Agent: "a", DeploymentID: "d1", State: record.StateActive,
			Epoch: 2, Revision: 10, CreatedAt: created, Grew: &record.Storage{Events: 3, EventBytes: 300}}
		if err := x.Index.Write(ctx, e); err != nil {
			t.Fatal(err)
		}
		late := e
		late.State, late.Epoch, late.Revision, late.Grew = record.StateHibernated, 1, 9, nil
		if err := x.Index.Write(ctx, late); err != nil {
			t.Fatal(err)
		}
		got, ok := x.Get(t, id)
		if !ok || got.State != record.StateActive || got.Epoch != 2 || got.Revision != 10 || !got.CreatedAt.Equal(created) {
			t.Fatalf("after a late older write: %+v (%v)", got, ok)
		}
		next := e
		next.State, next.Revision, next.CreatedAt = record.StateHibernated, 12, time.Time{}
		next.Grew = &record.Storage{Events: 5, EventBytes: 200}
		if err := x.Index.Write(ctx, next); err != nil {
			t.Fatal(err)
		}
		got, ok = x.Get(t, id)
		if !ok || got.State != record.StateHibernated || !got.CreatedAt.Equal(created) || got.Storage == nil ||
			*got.Storage != (record.Storage{Events: 5, EventBytes: 500}) {
			t.Fatalf("after a newer write: %+v storage %+v (%v)", got, got.Storage, ok)
		}
		recount := next
		recount.Revision, recount.Grew, recount.Storage = 13, nil, &record.Storage{Events: 7, EventBytes: 700, BlobBytes: 10}
		if err := x.Index.Write(ctx, recount); err != nil {
			t.Fatal(err)
		}
		if got, _ = x.Get(t, id); got.Storage == nil || *got.Storage != *recount.Storage {
			t.Fatalf("after a recount: %+v", got.Storage)
		}
	})
}
