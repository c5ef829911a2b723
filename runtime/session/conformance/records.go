package conformance

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/oklog/ulid/v2"
)

// RecordStore is a session.Records that can also create a record (the
// owner process's start does).
type RecordStore interface {
	session.Records
	CreateSession(ctx context.Context, rec record.SessionRecord) (uint64, error)
}

// Records runs the record store suite.
func Records(t *testing.T, open func(t *testing.T) RecordStore) {
	t.Run("update is a revision CAS", func(t *testing.T) { recordsCAS(t, open(t)) })
	t.Run("settle reads the writer", func(t *testing.T) { recordsSettle(t, open(t)) })
	t.Run("settle an update", func(t *testing.T) { recordsSettleUpdate(t, open(t)) })
	t.Run("hooks are create-only", func(t *testing.T) { recordsHooks(t, open(t)) })
	t.Run("tombstone at a revision", func(t *testing.T) { recordsTombstone(t, open(t)) })
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newRecord(t *testing.T) record.SessionRecord {
	t.Helper()
	id := ulid.Make().String()
	cp, err := session.EncodeNew(id, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := record.New(id, record.Owner{RunID: ulid.Make().String(), Deployment: "v1", Process: "p1", WireV: wire.CurrentVersion}, cp)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func mustIs(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("error %v, want %v", err, want)
	}
}

func recordsCAS(t *testing.T, st RecordStore) {
	ctx, rec := ctxOf(t), newRecord(t)
	rev, err := st.CreateSession(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.CreateSession(ctx, rec)
	var owned *record.OwnedError
	if !errors.As(err, &owned) || owned.SessionID != rec.SessionID {
		t.Fatalf("a second create: %v", err)
	}
	rec.WriteCounter = 1
	rev2, err := st.UpdateSession(ctx, rec, rev)
	if err != nil || rev2 <= rev {
		t.Fatalf("update at %d: %d, %v", rev, rev2, err)
	}
	rec.WriteCounter = 2
	_, err = st.UpdateSession(ctx, rec, rev)
	mustIs(t, err, record.ErrConflict)
	_, err = st.UpdateSession(ctx, rec, 0)
	mustIs(t, err, record.ErrInvalid)
	cur, err := st.LeaderSession(ctx, rec.SessionID)
	if err != nil || cur.Revision != rev2 || cur.Record.WriteCounter != 1 {
		t.Fatalf("leader read: %+v, %v", cur, err)
	}
	_, err = st.LeaderSession(ctx, ulid.Make().String())
	mustIs(t, err, record.ErrNotFound)
}

func recordsSettle(t *testing.T, st RecordStore) {
	ctx, rec := ctxOf(t), newRecord(t)
	rev, err := st.CreateSession(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.WriteCounter = 1
	if _, err := st.UpdateSession(ctx, rec, rev); err != nil {
		t.Fatal(err)
	}
	if cur, ok, err := st.Settle(ctx, rec.SessionID, rec.Writer, 1); err != nil || !ok || cur.Record.WriteCounter != 1 {
		t.Fatalf("the write that landed: %v %v", ok, err)
	}
	if _, ok, err := st.Settle(ctx, rec.SessionID, rec.Writer, 2); err != nil || ok {
		t.Fatalf("a write that did not land: %v %v", ok, err)
	}
	if _, ok, err := st.Settle(ctx, rec.SessionID, "another-run", 1); err != nil || ok {
		t.Fatalf("another writer: %v %v", ok, err)
	}
	if _, ok, err := st.Settle(ctx, ulid.Make().String(), rec.Writer, 1); err != nil || ok {
		t.Fatalf("no record: %v %v", ok, err)
	}
}

// recordsSettleUpdate: an update whose outcome is unknown settles as
// landed (its revision, nothing written again), as not landed with the
// record still at its revision (gated, then written once), or as a
// conflict when another write came first; a gate that refuses writes
// nothing.
func recordsSettleUpdate(t *testing.T, st RecordStore) {
	ctx, rec := ctxOf(t), newRecord(t)
	rev, err := st.CreateSession(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	gates := 0
	gate := func(context.Context) error { gates++; return nil }

	// It landed: the leader holds its stamp.
	rec.WriteCounter = 1
	landed, err := st.UpdateSession(ctx, rec, rev)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := st.SettleUpdate(ctx, rec, rev, gate); err != nil || got != landed || gates != 0 {
		t.Fatalf("a write that landed: revision %d, %v, %d gates; want %d, no gate", got, err, gates, landed)
	}

	// It did not land and nobody wrote since: gated, sent again once.
	rec.WriteCounter = 2
	got, err := st.SettleUpdate(ctx, rec, landed, gate)
	if err != nil || got <= landed || gates != 1 {
		t.Fatalf("a write that did not land: revision %d, %v, %d gates", got, err, gates)
	}
	if cur, _ := st.LeaderSession(ctx, rec.SessionID); cur.Revision != got || cur.Record.WriteCounter != 2 {
		t.Fatalf("after the settle: %+v, want the write at revision %d", cur, got)
	}

	// A refusing gate (a fenced owner) writes nothing.
	refused := errors.New("fenced")
	rec.WriteCounter = 3
	if _, err := st.SettleUpdate(ctx, rec, got, func(context.Context) error { return refused }); !errors.Is(err, refused) {
		t.Fatalf("a refusing gate: %v", err)
	}
	if cur, _ := st.LeaderSession(ctx, rec.SessionID); cur.Revision != got {
		t.Fatalf("a refusing gate wrote: revision %d, want %d", cur.Revision, got)
	}

	// Another write came first: a conflict, nothing written.
	other := rec
	other.Writer, other.WriteCounter = "another-run", 1
	now, err := st.UpdateSession(ctx, other, got)
	if err != nil {
		t.Fatal(err)
	}
	rec.WriteCounter = 4
	_, err = st.SettleUpdate(ctx, rec, got, gate)
	mustIs(t, err, record.ErrConflict)
	if cur, _ := st.LeaderSession(ctx, rec.SessionID); cur.Revision != now || cur.Record.Writer != "another-run" {
		t.Fatalf("after a conflict: %+v, want another-run's write at %d", cur, now)
	}
}

func recordsHooks(t *testing.T, st RecordStore) {
	ctx := ctxOf(t)
	addr := "C" + ulid.Make().String()
	tok, err := subjects.EncodeToken(addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = st.GetHook(ctx, tok)
	mustIs(t, err, record.ErrNotFound)
	_, err = st.CreateHook(ctx, record.Hook{Token: tok, Address: "another address", SessionID: "s1", WireV: wire.CurrentVersion})
	mustIs(t, err, record.ErrInvalid)
	h := record.Hook{Token: tok, Address: addr, SessionID: "s1", WireV: wire.CurrentVersion}
	rev, err := st.CreateHook(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	h2 := h
	h2.SessionID = "s2"
	_, err = st.CreateHook(ctx, h2)
	var owned *record.OwnedError
	if !errors.As(err, &owned) || owned.SessionID != "s1" || owned.Ended {
		t.Fatalf("a taken address: %v", err)
	}
	got, grev, err := st.GetHook(ctx, tok)
	if err != nil || grev != rev || got.SessionID != "s1" {
		t.Fatalf("get: %+v %d %v", got, grev, err)
	}
	_, _, err = st.GetHook(ctx, "not a token!")
	mustIs(t, err, record.ErrInvalid)
}

func recordsTombstone(t *testing.T, st RecordStore) {
	ctx := ctxOf(t)
	addr := "T" + ulid.Make().String()
	tok, err := subjects.EncodeToken(addr)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := st.CreateHook(ctx, record.Hook{Token: tok, Address: addr, SessionID: "s1", WireV: wire.CurrentVersion})
	if err != nil {
		t.Fatal(err)
	}
	trev, err := st.Tombstone(ctx, tok, rev)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.Tombstone(ctx, tok, rev)
	mustIs(t, err, record.ErrConflict)
	if again, err := st.Tombstone(ctx, tok, trev); err != nil || again != trev {
		t.Fatalf("a tombstone again: %d, %v; want %d (idempotent)", again, err, trev)
	}
	h, hrev, err := st.GetHook(ctx, tok)
	if err != nil || !h.Tombstone || hrev != trev {
		t.Fatalf("after the tombstone: %+v %d %v", h, hrev, err)
	}
	_, err = st.CreateHook(ctx, record.Hook{Token: tok, Address: addr, SessionID: "s2", WireV: wire.CurrentVersion})
	var owned *record.OwnedError
	if !errors.As(err, &owned) || !owned.Ended {
		t.Fatalf("claiming an ended address: %v", err)
	}
}
