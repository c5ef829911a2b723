package conformance

import (
	"errors"
	"testing"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime/session"
)

// Appender runs the event appender suite; open returns a fresh stream's
// appender.
func Appender(t *testing.T, open func(t *testing.T) session.Appender) {
	t.Run("exactly once and contiguous", func(t *testing.T) {
		ctx, a := ctxOf(t), open(t)
		if last, err := a.Last(ctx); err != nil || last != 0 {
			t.Fatalf("a new stream's last: %d %v", last, err)
		}
		for _, seq := range []uint64{1, 2, 2, 1, 3} {
			if err := a.Append(ctx, seq, []byte(`{"seq":`+string(rune('0'+seq))+`}`)); err != nil {
				t.Fatalf("append %d: %v", seq, err)
			}
		}
		if err := a.Append(ctx, 5, []byte(`{}`)); !errors.Is(err, kv.ErrEventGap) {
			t.Fatalf("a gap: %v", err)
		}
		if last, err := a.Last(ctx); err != nil || last != 3 {
			t.Fatalf("last: %d %v", last, err)
		}
		// A commit's events at once: what is there is skipped, the rest
		// follow in order; a gap is refused and appends nothing.
		batch := func(from, to uint64) [][]byte {
			var out [][]byte
			for seq := from; seq <= to; seq++ {
				out = append(out, []byte(`{"seq":`+string(rune('0'+seq))+`}`))
			}
			return out
		}
		if err := a.AppendAll(ctx, 2, batch(2, 6)); err != nil {
			t.Fatalf("append 2..6: %v", err)
		}
		if err := a.AppendAll(ctx, 1, batch(1, 6)); err != nil {
			t.Fatalf("append 1..6 again: %v", err)
		}
		if err := a.AppendAll(ctx, 8, batch(8, 9)); !errors.Is(err, kv.ErrEventGap) {
			t.Fatalf("a gap in a batch: %v", err)
		}
		if last, err := a.Last(ctx); err != nil || last != 6 {
			t.Fatalf("last after the batches: %d %v", last, err)
		}
	})
}

// Blobs runs the object store suite.
func Blobs(t *testing.T, open func(t *testing.T) session.Blobs) {
	t.Run("put get has delete", func(t *testing.T) {
		ctx, b := ctxOf(t), open(t)
		name := "s1/" + tokens(1)[0]
		if ok, err := b.Has(ctx, name); err != nil || ok {
			t.Fatalf("has before put: %v %v", ok, err)
		}
		if _, err := b.Get(ctx, name); !errors.Is(err, session.ErrBlobNotFound) {
			t.Fatalf("get before put: %v", err)
		}
		for range 2 { // content-addressed: a second put is harmless
			if err := b.Put(ctx, name, []byte("content")); err != nil {
				t.Fatal(err)
			}
		}
		if ok, err := b.Has(ctx, name); err != nil || !ok {
			t.Fatalf("has: %v %v", ok, err)
		}
		if data, err := b.Get(ctx, name); err != nil || string(data) != "content" {
			t.Fatalf("get: %q %v", data, err)
		}
		if err := b.Delete(ctx, name); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Get(ctx, name); !errors.Is(err, session.ErrBlobNotFound) {
			t.Fatalf("get after delete: %v", err)
		}
		if err := b.Delete(ctx, name); err != nil {
			t.Fatalf("delete of a missing blob: %v", err)
		}
	})
}
