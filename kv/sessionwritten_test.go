package kv_test

import (
	"errors"
	"testing"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

// TestSessionWrittenByDirectGet: SessionWritten reads the record as
// written at a revision by a direct get, with no leader read (counted on
// the leader-read request subject), even after the record moved on; a
// revision that holds another session's record or a delete marker is
// record.ErrNotFound; a revision the stream no longer holds (past the
// bucket's history of 8) is asked of the leader, which reports the newer
// revision.
func TestSessionWrittenByDirectGet(t *testing.T) {
	t.Parallel()
	s := natstest.Server(t)
	ensure(t, s.ClientURL(), 1)
	st, c := open(t, s.ClientURL()), ctx(t)
	id := uid("s")
	reads := countLeaderReads(t, s.ClientURL(), subjects.Default().SessionsBucket(), subjects.SessionKey(id))
	read := func(name string, rev uint64, wantReads int64) (record.Session, error) {
		t.Helper()
		before := reads.Count(t)
		got, err := st.SessionWritten(c, id, rev)
		if n := reads.Count(t) - before; n != wantReads {
			t.Fatalf("%s: %d leader reads, want %d", name, n, wantReads)
		}
		return got, err
	}
	rec := sessionRec(id, "run1")
	rev1, err := st.CreateSession(c, rec)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := read("at its revision", rev1, 0); err != nil || got.Revision != rev1 || got.Record.OwnerRunID != "run1" {
		t.Fatalf("at its revision: %+v %v", got, err)
	}
	rec.WriteCounter = 2
	rev2, err := st.UpdateSession(c, rec, rev1)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := read("moved on", rev1, 0); err != nil || got.Revision != rev1 || got.Record.WriteCounter != 1 {
		t.Fatalf("the first revision after an update: %+v %v", got, err)
	}
	if got, err := read("the newest", rev2, 0); err != nil || got.Revision != rev2 || got.Record.WriteCounter != 2 {
		t.Fatalf("the newest revision: %+v %v", got, err)
	}
	other, err := st.CreateSession(c, sessionRec(uid("s"), "run2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := read("another session's revision", other, 0); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("another session's revision: %v, want ErrNotFound", err)
	}
	rev := rev2
	for i := range 8 {
		rec.WriteCounter = uint64(i + 3)
		if rev, err = st.UpdateSession(c, rec, rev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := read("past the history", rev1, 1); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("a revision past the history: %v, want ErrConflict", err)
	}
	if err := st.DeleteSession(c, id, rev); err != nil {
		t.Fatal(err)
	}
	after, err := st.CreateSession(c, sessionRec(uid("s"), "run3"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := read("its delete marker", after-1, 0); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("the delete marker's revision: %v, want ErrNotFound", err)
	}
}
