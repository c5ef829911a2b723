package jsport_test

import (
	"errors"
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime/jsport"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/wire"
	"github.com/oklog/ulid/v2"
)

// CollectSegment on the object store and the inventory: a segment is
// deleted only when the session letting it go recorded its reference and
// no other session (nor the keep mark of a segment stored before the
// inventory) refers to it; the references go either way.
func TestCollectSegment(t *testing.T) {
	t.Parallel()
	h := harness.For(t)
	e := h.Env(h.Server().URL())
	ctx := t.Context()
	obs, err := e.JS.ObjectStore(ctx, e.Names.StateBucket())
	h.Check(err)
	inv, err := kv.OpenInventory(ctx, e.JS, e.Names)
	h.Check(err)
	blobs := jsport.Blobs{Store: func() jsport.ObjectStore { return obs }}
	seg := func(text string) string {
		ref := wire.NewBlobRef([]byte(text))
		h.Check(blobs.Put(ctx, ref.Digest, []byte(text)))
		return ref.Digest
	}
	stored := func(d string) bool {
		ok, err := blobs.Has(ctx, d)
		h.Check(err)
		return ok
	}
	collect := func(id, d string) bool {
		t.Helper()
		deleted, _, err := session.CollectSegment(ctx, blobs, inv, id, d)
		h.Check(err)
		return deleted
	}
	a, b := ulid.Make().String(), ulid.Make().String()

	shared := seg("shared history")
	h.Check(inv.RefSegment(ctx, a, shared))
	h.Check(inv.RefSegment(ctx, b, shared))
	if collect(a, shared) || !stored(shared) {
		t.Fatal("a segment another session refers to was deleted")
	}
	if refs, err := inv.Referrers(ctx, shared); err != nil || len(refs) != 1 || refs[0] != b {
		t.Fatalf("referrers after a's let go: %v %v, want [b]", refs, err)
	}
	if !collect(b, shared) || stored(shared) {
		t.Fatal("a segment no session refers to any more stays")
	}

	legacy := seg("stored before the inventory")
	if collect(a, legacy) || !stored(legacy) {
		t.Fatal("a segment the session never recorded was deleted")
	}
	kept := seg("kept")
	h.Check(inv.KeepSegment(ctx, kept))
	h.Check(inv.RefSegment(ctx, a, kept))
	if collect(a, kept) || !stored(kept) {
		t.Fatal("a segment marked to keep was deleted")
	}
	if segs, err := inv.Segments(ctx, a); err != nil || len(segs) != 0 {
		t.Fatalf("a's references left: %v %v", segs, err)
	}
	if _, err := blobs.Get(ctx, shared); !errors.Is(err, session.ErrBlobNotFound) {
		t.Fatalf("the deleted segment reads %v", err)
	}
}
