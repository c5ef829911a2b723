package harness

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// TestEventsReadsWhatChanged: Events, which reads only what changed since
// its last read of a session, returns what a whole read returns after
// appends, a purge of the subject's first events, a purge of all of them,
// appends after that, and another session's appends between.
func TestEventsReadsWhatChanged(t *testing.T) {
	tt := For(t)
	e := tt.Env(tt.Server().URL())
	ctx := t.Context()
	stream, err := e.JS.Stream(ctx, e.Names.EventsStream())
	tt.Check(err)
	seq := map[string]uint64{}
	appendEvents := func(id string, n int) {
		t.Helper()
		for range n {
			seq[id]++
			b, err := wire.EncodeEvent(nil, wire.Event{V: 1, SessionID: id, Seq: seq[id], Kind: wire.EventMessageOutput,
				Time: time.Now(), OwnerRunID: "r1", DeploymentID: "v1", Data: []byte(fmt.Sprintf(`{"turnId":"t1","text":"%s %d"}`, id, seq[id]))})
			tt.Check(err)
			_, err = e.JS.Publish(ctx, e.Names.Events(id), b)
			tt.Check(err)
		}
	}
	// whole reads the session's events with a reader of its own, which
	// has read nothing before.
	whole := func(id string) []wire.Event {
		t.Helper()
		fresh := &Env{NC: e.NC, JS: e.JS, Names: e.Names}
		evs, err := fresh.Events(ctx, id)
		tt.Check(err)
		return evs
	}
	check := func(step, id string, want int) {
		t.Helper()
		got, err := e.Events(ctx, id)
		tt.Check(err)
		if len(got) != want {
			t.Fatalf("%s: %d events of %s, want %d", step, len(got), id, want)
		}
		if w := whole(id); !slices.EqualFunc(got, w, func(a, b wire.Event) bool {
			return a.Seq == b.Seq && string(a.Data) == string(b.Data)
		}) {
			t.Fatalf("%s: read %v, a whole read %v", step, Trace(got), Trace(w))
		}
	}
	check("none", "a", 0)
	appendEvents("a", 3)
	check("first read", "a", 3)
	check("nothing new", "a", 3)
	appendEvents("b", 2)
	appendEvents("a", 2)
	check("appended", "a", 5)
	check("the other session", "b", 2)
	got, err := e.Events(ctx, "a")
	tt.Check(err)
	got[0].Seq = 99 // a caller's change is its own
	check("after a caller changed its copy", "a", 5)

	tt.Check(stream.Purge(ctx, jetstream.WithPurgeSubject(e.Names.Events("a")), jetstream.WithPurgeKeep(2)))
	check("front purged", "a", 2)
	appendEvents("a", 1)
	check("front purged, then appended", "a", 3)
	tt.Check(stream.Purge(ctx, jetstream.WithPurgeSubject(e.Names.Events("a"))))
	check("all purged", "a", 0)
	appendEvents("a", 4)
	check("appended after the purge", "a", 4)
}
