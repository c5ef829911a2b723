package kv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

func testSessionLifecycle(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	id := uid("s")
	rev, err := st.CreateSession(c, sessionRec(id, "run1"))
	if err != nil {
		t.Fatal(err)
	}
	oe := mustOwned(t, func() error { _, err := st.CreateSession(c, sessionRec(id, "run2")); return err }())
	if oe.SessionID != id || oe.Owner != "run1" || oe.Revision != rev {
		t.Fatalf("owned error %+v, want owner run1 at %d", oe, rev)
	}
	got, err := st.LeaderSession(c, id)
	if err != nil || got.Revision != rev || got.Record.OwnerRunID != "run1" || got.Record.UpdatedAt.IsZero() {
		t.Fatalf("leader read: %+v %v", got, err)
	}
	next := got.Record
	next.Epoch, next.OwnerRunID, next.WriteCounter = 2, "run2", 2
	rev2, err := st.UpdateSession(c, next, rev)
	if err != nil {
		t.Fatal(err)
	}
	// A write at the stale revision fails and changes nothing.
	stale := next
	stale.OwnerRunID = "stale"
	_, err = st.UpdateSession(c, stale, rev)
	mustErr(t, err, record.ErrConflict)
	// A delete at the stale revision deletes nothing.
	mustErr(t, st.DeleteSession(c, id, rev), record.ErrConflict)
	got, err = st.LeaderSession(c, id)
	if err != nil || got.Revision != rev2 || got.Record.OwnerRunID != "run2" {
		t.Fatalf("after stale write and delete: %+v %v", got, err)
	}
	mustErr(t, st.DeleteSession(c, id, 0), record.ErrInvalid)
	if err := st.DeleteSession(c, id, rev2); err != nil {
		t.Fatal(err)
	}
	_, err = st.LeaderSession(c, id)
	mustErr(t, err, record.ErrNotFound)
	// A deleted record can be created again.
	if _, err := st.CreateSession(c, sessionRec(id, "run3")); err != nil {
		t.Fatalf("create over a deleted record: %v", err)
	}
	waitDirect(t, st, id, "run3")
}

// waitDirect polls the direct (possibly stale) read until it shows run.
func waitDirect(t *testing.T, st *kv.Store, id, run string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := st.GetSession(ctx(t), id)
		if err == nil && got.Record.OwnerRunID == run {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("direct get never showed %s: %+v %v", run, got, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testSessionValidation(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	id := uid("s")
	for name, mut := range map[string]func(*record.SessionRecord){
		"bad id":         func(r *record.SessionRecord) { r.SessionID = "a.b" },
		"latest":         func(r *record.SessionRecord) { r.DeploymentID = "latest" },
		"LATEST":         func(r *record.SessionRecord) { r.DeploymentID = "LATEST" },
		"no deployment":  func(r *record.SessionRecord) { r.DeploymentID = "" },
		"bad state":      func(r *record.SessionRecord) { r.State = "running" },
		"bad checkpoint": func(r *record.SessionRecord) { r.Checkpoint = []byte("{") },
	} {
		r := sessionRec(id, "run1")
		mut(&r)
		if _, err := st.CreateSession(c, r); !errors.Is(err, record.ErrInvalid) {
			t.Errorf("%s: want record.ErrInvalid, got %v", name, err)
		}
	}
	r := sessionRec(id, "run1")
	r.DeploymentID = "latest"
	_, err := st.CreateSession(c, r)
	mustErr(t, err, subjects.ErrBadDeployment)
	_, err = st.UpdateSession(c, sessionRec(id, "run1"), 0)
	mustErr(t, err, record.ErrInvalid)
	_, err = st.LeaderSession(c, id)
	mustErr(t, err, record.ErrNotFound)
	_, err = st.GetSession(c, id)
	mustErr(t, err, record.ErrNotFound)
	_, err = st.GetSession(c, "no/such")
	mustErr(t, err, record.ErrInvalid)
}

func testSettle(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	id := uid("s")
	rev, err := st.CreateSession(c, sessionRec(id, "run1"))
	if err != nil {
		t.Fatal(err)
	}
	r := sessionRec(id, "run1")
	r.WriteCounter = 2
	if rev, err = st.UpdateSession(c, r, rev); err != nil {
		t.Fatal(err)
	}
	settle := func(writer string, counter uint64) bool {
		t.Helper()
		cur, ok, err := st.Settle(c, id, writer, counter)
		if err != nil {
			t.Fatal(err)
		}
		if ok && cur.Revision != rev {
			t.Fatalf("settled at %d, want %d", cur.Revision, rev)
		}
		return ok
	}
	if !settle("run1", 2) || settle("run1", 1) || settle("run2", 2) {
		t.Fatal("settle: the newest write is run1/2 only")
	}
	r2 := sessionRec(id, "run2")
	r2.Epoch = 2
	if rev, err = st.UpdateSession(c, r2, rev); err != nil {
		t.Fatal(err)
	}
	if settle("run1", 2) || !settle("run2", 1) {
		t.Fatal("settle after a successor's write")
	}
	if _, ok, err := st.Settle(c, uid("missing"), "run1", 1); ok || err != nil {
		t.Fatalf("settle of a missing record: %v %v", ok, err)
	}
}

// testSessionAt writes through one node and reads the exact revision through
// another: the leader read must return it at once (no stale replica answer).
func testSessionAt(t *testing.T, open opener) {
	a, b, c := open(t, 0), open(t, 1), ctx(t)
	id := uid("s")
	rev, err := a.CreateSession(c, sessionRec(id, "run0"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		r := sessionRec(id, "run0")
		r.WriteCounter = uint64(i + 2)
		prev := rev
		if rev, err = a.UpdateSession(c, r, rev); err != nil {
			t.Fatal(err)
		}
		got, err := b.SessionAt(c, id, rev)
		if err != nil || got.Revision != rev || got.Record.WriteCounter != r.WriteCounter {
			t.Fatalf("round %d: SessionAt(%d) = %+v, %v", i, rev, got, err)
		}
		_, err = b.SessionAt(c, id, prev)
		mustErr(t, err, record.ErrConflict)
	}
	short, cancel := context.WithTimeout(c, 300*time.Millisecond)
	defer cancel()
	if _, err := b.SessionAt(short, id, rev+1000); err == nil {
		t.Fatal("SessionAt of a revision never written succeeded")
	}
	if err := a.DeleteSession(c, id, rev); err != nil {
		t.Fatal(err)
	}
	_, err = b.SessionAt(c, id, rev)
	mustErr(t, err, record.ErrConflict)
	_, err = b.SessionAt(c, id, 0)
	mustErr(t, err, record.ErrInvalid)
}
