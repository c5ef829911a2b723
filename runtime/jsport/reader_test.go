package jsport

import (
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A reader asks whether its consumer still answers only when a second
// heartbeat window in a row is missed: a flood that makes every reader of
// a process miss one window at once sends no info requests.
func TestAliveChecksGated(t *testing.T) {
	t.Parallel()
	h := harness.For(t)
	srv := h.Server()
	e := h.Env(srv.URL())
	in := Inbox{JS: e.JS, Names: e.Names}
	infos := make(chan *nats.Msg, 16)
	sub, err := e.NC.ChanSubscribe("$JS.API.CONSUMER.INFO."+e.Names.InboxStream()+".c-alive", infos)
	h.Check(err)
	defer sub.Unsubscribe()
	h.Check(e.NC.Flush())
	rd, err := in.Open(t.Context(), session.Cursor{Name: "c-alive", Tokens: []string{"alive"}, Start: 1, Fresh: true})
	h.Check(err)
	defer rd.Close()
	r := rd.(*reader)

	r.failed(r.cc, jetstream.ErrNoHeartbeat)
	if r.checking.Load() {
		t.Fatal("one missed heartbeat window started a consumer check")
	}
	r.failed(r.cc, jetstream.ErrNoHeartbeat)
	select {
	case <-infos:
	case <-time.After(10 * time.Second):
		t.Fatal("a second missed window in a row sent no consumer info request")
	}
	select {
	case err := <-rd.Lost():
		t.Fatalf("a consumer that answers lost its reader: %v", err)
	default:
	}
}
