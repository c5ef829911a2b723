package kv_test

import (
	"testing"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

// TestMarkerCreateAfterOwnDelete: a marker created where this process
// deleted the session's last one expects that delete marker at once — a
// create with no leader read (counted on the leader-read request
// subject). A hint gone stale (another process wrote and deleted the key
// since) conflicts and the create settles by one leader read, as a
// create without a hint does.
func TestMarkerCreateAfterOwnDelete(t *testing.T) {
	t.Parallel()
	s := natstest.Server(t)
	ensure(t, s.ClientURL(), 1)
	a, b, c := open(t, s.ClientURL()), open(t, s.ClientURL()), ctx(t)
	id := uid("s")
	reads := countLeaderReads(t, s.ClientURL(), subjects.Default().HooksBucket(), subjects.MarkerKey(id))
	m := record.Marker{HandoffID: "h1", SessionID: id, SourceRun: "run1", Target: "dep-b", TriggerSeq: 42, StagedRevision: 7}
	step := func(name string, wantReads int64, do func() error) {
		t.Helper()
		before := reads.Count(t)
		if err := do(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := reads.Count(t) - before; got != wantReads {
			t.Fatalf("%s: %d leader reads, want %d", name, got, wantReads)
		}
	}
	var rev uint64
	step("first create, no marker ever", 0, func() (err error) { rev, err = a.CreateMarker(c, m); return err })
	step("delete", 0, func() error { return a.DeleteMarker(c, id, rev) })
	step("create after own delete", 0, func() (err error) { rev, err = a.CreateMarker(c, m); return err })
	step("delete again", 0, func() error { return a.DeleteMarker(c, id, rev) })
	step("create by another process", 1, func() (err error) { rev, err = b.CreateMarker(c, m); return err })
	step("its delete", 0, func() error { return b.DeleteMarker(c, id, rev) })
	step("create with a stale hint", 1, func() (err error) { rev, err = a.CreateMarker(c, m); return err })
	got, grev, err := a.GetMarker(c, id)
	if err != nil || grev != rev || got.HandoffID != "h1" {
		t.Fatalf("the marker: %+v %d %v", got, grev, err)
	}
}

// countLeaderReads counts the leader reads (STREAM.MSG.GET) of a
// bucket's stream that name one key.
func countLeaderReads(t *testing.T, url, bucket, key string) *natstest.Requests {
	t.Helper()
	return natstest.CountRequests(t, url, "$JS.API.STREAM.MSG.GET.KV_"+bucket, []byte(subjects.KVSubject(bucket, key)+`"`))
}
