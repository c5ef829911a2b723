package kv_test

import (
	"testing"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

func token(t *testing.T, raw string) string {
	t.Helper()
	tok, err := subjects.EncodeToken(raw)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func testHookLifecycle(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	alias := "<" + uid("msg") + "@example.com>"
	tok := token(t, alias)
	rev, err := st.CreateHook(c, record.Hook{Token: tok, SessionID: "s1", WireV: 1})
	if err != nil {
		t.Fatal(err)
	}
	h := waitHook(t, st, tok, rev)
	if h.Address != alias || h.SessionID != "s1" || h.Tombstone {
		t.Fatalf("get hook: %+v", h)
	}
	h.WireV = 2
	rev2, err := st.UpdateHook(c, h, rev)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.UpdateHook(c, h, rev)
	mustErr(t, err, record.ErrConflict)
	_, err = st.Tombstone(c, tok, rev)
	mustErr(t, err, record.ErrConflict)
	mustErr(t, st.DeleteHook(c, tok, rev), record.ErrConflict)
	rev3, err := st.Tombstone(c, tok, rev2)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := st.Tombstone(c, tok, rev3); err != nil || again != rev3 {
		t.Fatalf("tombstone twice: %d %v", again, err)
	}
	_, err = st.CreateHook(c, record.Hook{Token: tok, SessionID: "s2"})
	if oe := mustOwned(t, err); oe.SessionID != "s1" || !oe.Ended || oe.Revision != rev3 {
		t.Fatalf("claim over a tombstone: %+v", oe)
	}
	if err := st.DeleteHook(c, tok, rev3); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateHook(c, record.Hook{Token: tok, SessionID: "s2"}); err != nil {
		t.Fatalf("claim of a deleted hook: %v", err)
	}
}

// waitHook polls the direct (possibly stale) read until it shows rev.
func waitHook(t *testing.T, st *kv.Store, tok string, rev uint64) record.Hook {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, got, err := st.GetHook(ctx(t), tok)
		if err == nil && got == rev {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("direct get of %s never showed revision %d: %d %v", tok, rev, got, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testHookValidation(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	for name, h := range map[string]record.Hook{
		"raw token":        {Token: "C123.456", SessionID: "s1"},
		"empty token":      {Token: "", SessionID: "s1"},
		"address mismatch": {Token: "abc", Address: "abd", SessionID: "s1"},
		"bad session":      {Token: "abc", SessionID: "s.1"},
	} {
		if _, err := st.CreateHook(c, h); err == nil {
			t.Errorf("%s: created", name)
		} else {
			mustErr(t, err, record.ErrInvalid)
		}
	}
	_, _, err := st.GetHook(c, "no.such")
	mustErr(t, err, record.ErrInvalid)
	_, _, err = st.GetHook(c, token(t, uid("none")))
	mustErr(t, err, record.ErrNotFound)
}

func testMarkers(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	id := uid("s")
	m := record.Marker{HandoffID: "h1", SessionID: id, SourceRun: "run1", Target: "dep-b", TriggerSeq: 42, StagedRevision: 7}
	rev, err := st.CreateMarker(c, m)
	if err != nil {
		t.Fatal(err)
	}
	dup := m
	dup.HandoffID = "h2"
	_, err = st.CreateMarker(c, dup)
	if oe := mustOwned(t, err); oe.Owner != "h1" || oe.SessionID != id || oe.Revision != rev {
		t.Fatalf("second marker: %+v", oe)
	}
	got, grev, err := st.GetMarker(c, id)
	if err != nil || grev != rev || got.HandoffID != "h1" || got.TriggerSeq != 42 || got.CreatedAt.IsZero() {
		t.Fatalf("get marker: %+v %d %v", got, grev, err)
	}
	got.Outcome = "completed"
	rev2, err := st.UpdateMarker(c, got, rev)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.UpdateMarker(c, got, rev)
	mustErr(t, err, record.ErrConflict)
	mustErr(t, st.DeleteMarker(c, id, rev), record.ErrConflict)
	if err := st.DeleteMarker(c, id, rev2); err != nil {
		t.Fatal(err)
	}
	_, _, err = st.GetMarker(c, id)
	mustErr(t, err, record.ErrNotFound)
	bad := m
	bad.Target = "latest"
	_, err = st.CreateMarker(c, bad)
	mustErr(t, err, record.ErrInvalid)
	if _, err := st.CreateMarker(c, dup); err != nil {
		t.Fatalf("marker after delete: %v", err)
	}
}
