package kv_test

import (
	"bytes"
	"testing"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
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
		before := reads.count(t)
		if err := do(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := reads.count(t) - before; got != wantReads {
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

// leaderReads counts the leader reads (STREAM.MSG.GET) of a bucket's
// stream that name one key, as a second connection receives them.
type leaderReads struct {
	nc   *nats.Conn
	msgs chan *nats.Msg
	want []byte
	n    int64
}

func countLeaderReads(t *testing.T, url, bucket, key string) *leaderReads {
	t.Helper()
	nc, _ := natstest.Connect(t, url)
	r := &leaderReads{nc: nc, msgs: make(chan *nats.Msg, 1024), want: []byte(subjects.KVSubject(bucket, key) + `"`)}
	if _, err := nc.ChanSubscribe("$JS.API.STREAM.MSG.GET.KV_"+bucket, r.msgs); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

// count is the reads so far. The server routes a request to this
// connection as it receives it, before it answers: once a read was
// answered, a flush of this connection (its PONG comes after every
// message routed before it, and the reading goroutine queues each on the
// channel in order) has it on the channel.
func (r *leaderReads) count(t *testing.T) int64 {
	t.Helper()
	if err := r.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case m := <-r.msgs:
			if bytes.Contains(m.Data, r.want) {
				r.n++
			}
		default:
			return r.n
		}
	}
}
