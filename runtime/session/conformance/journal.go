package conformance

import (
	"errors"
	"testing"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/session"
)

// Journal runs the journal store suite: create-only entries, current
// reads, replacement at a revision, removal and re-creation.
func Journal(t *testing.T, open func(t *testing.T) session.JournalStore) {
	t.Run("create only, read, update, delete", func(t *testing.T) {
		ctx, j := ctxOf(t), open(t)
		key := tokens(1)[0] + ".t1.1.1"
		if _, _, err := j.Get(ctx, key); !errors.Is(err, record.ErrNotFound) {
			t.Fatalf("get before create: %v", err)
		}
		rev, err := j.Create(ctx, key, []byte(`{"a":1}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Create(ctx, key, []byte(`{"a":2}`)); !errors.Is(err, record.ErrExists) {
			t.Fatalf("second create: %v, want record.ErrExists", err)
		}
		data, got, err := j.Get(ctx, key)
		if err != nil || string(data) != `{"a":1}` || got != rev {
			t.Fatalf("get: %s rev %d (want %d), %v", data, got, rev, err)
		}
		if _, err := j.Update(ctx, key, []byte(`{"a":3}`), rev+100); !errors.Is(err, record.ErrConflict) {
			t.Fatalf("update at a stale revision: %v", err)
		}
		rev2, err := j.Update(ctx, key, []byte(`{"a":3}`), rev)
		if err != nil {
			t.Fatal(err)
		}
		if data, got, err := j.Get(ctx, key); err != nil || string(data) != `{"a":3}` || got != rev2 {
			t.Fatalf("get after update: %s rev %d, %v", data, got, err)
		}
		for range 2 {
			if err := j.Delete(ctx, key); err != nil {
				t.Fatalf("delete: %v", err)
			}
		}
		if _, _, err := j.Get(ctx, key); !errors.Is(err, record.ErrNotFound) {
			t.Fatalf("get after delete: %v", err)
		}
		if _, err := j.Create(ctx, key, []byte(`{"a":4}`)); err != nil {
			t.Fatalf("create over a removed entry: %v", err)
		}
	})
}
