package conformance

import (
	"errors"
	"testing"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/record"
	"github.com/oklog/ulid/v2"
)

// HandoffStore is a record store the handoff transaction can run on
// (handoff.Store and handoff.Reader): kv.Store, memory.Records.
type HandoffStore interface {
	RecordStore
	handoff.Store
	handoff.Reader
}

// Handoff runs the suite of what the handoff transaction needs of a record
// store beyond session.Records: reads at exactly a revision and as written
// at a revision, and create-only markers deleted by a revision CAS, read
// from the leader and as a hint.
func Handoff(t *testing.T, open func(t *testing.T) HandoffStore) {
	t.Run("a read at a revision", func(t *testing.T) { handoffSessionAt(t, open(t)) })
	t.Run("markers are create-only", func(t *testing.T) { handoffMarkers(t, open(t)) })
}

func handoffSessionAt(t *testing.T, st HandoffStore) {
	ctx, rec := ctxOf(t), newRecord(t)
	rev, err := st.CreateSession(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	if cur, err := st.SessionAt(ctx, rec.SessionID, rev); err != nil || cur.Revision != rev || cur.Record.SessionID != rec.SessionID {
		t.Fatalf("at its revision: %+v %v", cur, err)
	}
	if cur, err := st.GetSession(ctx, rec.SessionID); err != nil || cur.Revision != rev {
		t.Fatalf("a direct get: %d %v", cur.Revision, err)
	}
	if cur, err := st.SessionWritten(ctx, rec.SessionID, rev); err != nil || cur.Revision != rev || cur.Record.SessionID != rec.SessionID {
		t.Fatalf("as written at its revision: %+v %v", cur, err)
	}
	counter := rec.WriteCounter
	rec.WriteCounter = counter + 1
	if _, err := st.UpdateSession(ctx, rec, rev); err != nil {
		t.Fatal(err)
	}
	_, err = st.SessionAt(ctx, rec.SessionID, rev)
	mustIs(t, err, record.ErrConflict)
	// The record as written at a revision it moved on from: that record
	// (kv, by its sequence) or ErrConflict (a store that keeps only the
	// newest), never the newer record.
	switch cur, err := st.SessionWritten(ctx, rec.SessionID, rev); {
	case err == nil && (cur.Revision != rev || cur.Record.WriteCounter != counter):
		t.Fatalf("as written at a revision it moved on from: revision %d, counter %d", cur.Revision, cur.Record.WriteCounter)
	case err != nil && !errors.Is(err, record.ErrConflict):
		t.Fatalf("as written at a revision it moved on from: %v", err)
	}
	_, err = st.SessionAt(ctx, ulid.Make().String(), 1)
	mustIs(t, err, record.ErrNotFound)
	_, err = st.SessionWritten(ctx, ulid.Make().String(), rev)
	mustIs(t, err, record.ErrNotFound)
}

func handoffMarkers(t *testing.T, st HandoffStore) {
	ctx, id := ctxOf(t), ulid.Make().String()
	m := record.Marker{SessionID: id, HandoffID: "h1", SourceRun: "r1", Target: "v2", TriggerSeq: 1, StagedRevision: 1}
	rev, err := st.CreateMarker(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	second := m
	second.HandoffID = "h2"
	_, err = st.CreateMarker(ctx, second)
	var owned *record.OwnedError
	if !errors.As(err, &owned) || owned.Owner != "h1" {
		t.Fatalf("a second marker: %v", err)
	}
	got, grev, err := st.GetMarker(ctx, id)
	if err != nil || grev != rev || got.HandoffID != "h1" || got.Target != "v2" {
		t.Fatalf("get: %+v %d %v", got, grev, err)
	}
	if got, hrev, err := st.MarkerHint(ctx, id); err != nil || hrev != rev || got.HandoffID != "h1" {
		t.Fatalf("hint: %+v %d %v", got, hrev, err)
	}
	mustIs(t, st.DeleteMarker(ctx, id, rev+1000), record.ErrConflict)
	if err := st.DeleteMarker(ctx, id, rev); err != nil {
		t.Fatal(err)
	}
	_, _, err = st.GetMarker(ctx, id)
	mustIs(t, err, record.ErrNotFound)
	_, _, err = st.MarkerHint(ctx, id)
	mustIs(t, err, record.ErrNotFound)
	if _, err := st.CreateMarker(ctx, second); err != nil {
		t.Fatalf("a marker after the delete: %v", err)
	}
	_, err = st.CreateMarker(ctx, record.Marker{SessionID: ulid.Make().String(), HandoffID: "h3", Target: "latest"})
	mustIs(t, err, record.ErrInvalid)
}
