package kv_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
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

// TestSessionWrittenFromAServerThatLacksIt: a direct get may be answered
// by a server that does not hold the revision yet (a follower that lags,
// a mirror that serves direct gets); its "not found" is no answer, and
// SessionWritten asks the leader. The fault is real: a mirror of the
// sessions bucket that takes only another session's record serves the
// bucket's direct gets in the same queue group as the stream once it has
// caught up (the loop waits for its first 404), so that direct gets of
// the session's revision meet it from then on, about one in two. Each
// read must still be the record at its revision, and at least one must
// have been asked of the leader.
func TestSessionWrittenFromAServerThatLacksIt(t *testing.T) {
	t.Parallel()
	s := natstest.Server(t)
	ensure(t, s.ClientURL(), 1)
	st, c := open(t, s.ClientURL()), ctx(t)
	id := uid("s")
	rev, err := st.CreateSession(c, sessionRec(id, "run1"))
	if err != nil {
		t.Fatal(err)
	}
	bucket := subjects.Default().SessionsBucket()
	nc, _ := natstest.Connect(t, s.ClientURL())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	other := uid("s")
	if _, err := js.CreateStream(c, jetstream.StreamConfig{Name: "LAGGING_SESSIONS", Storage: jetstream.MemoryStorage,
		Mirror:       &jetstream.StreamSource{Name: "KV_" + bucket, FilterSubject: subjects.KVSubject(bucket, subjects.SessionKey(other))},
		MirrorDirect: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateSession(c, sessionRec(other, "run2")); err != nil { // the mirror's one message
		t.Fatal(err)
	}
	lacking := func() bool { // does a direct get of rev meet a server without it?
		m, err := nc.Request("$JS.API.DIRECT.GET.KV_"+bucket, fmt.Appendf(nil, `{"seq":%d}`, rev), 5*time.Second)
		return err == nil && m.Header.Get("Status") == "404"
	}
	deadline := time.Now().Add(10 * time.Second)
	for !lacking() {
		if time.Now().After(deadline) {
			t.Fatal("no direct get met the mirror: the fault is not in place")
		}
	}
	reads := countLeaderReads(t, s.ClientURL(), bucket, subjects.SessionKey(id))
	for i := range 40 {
		got, err := st.SessionWritten(c, id, rev)
		if err != nil || got.Revision != rev || got.Record.OwnerRunID != "run1" {
			t.Fatalf("read %d: %+v %v, want the record at %d", i, got, err, rev)
		}
	}
	n := reads.Count(t)
	if n == 0 {
		t.Fatal("40 reads, none asked of the leader: the lacking server never answered")
	}
	t.Logf("40 reads, %d of them asked of the leader after the mirror's 404", n)
}
