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
// heartbeat window in a row is missed, and the process's readers ask at
// most cap(aliveChecks) at a time: a flood that makes every reader of a
// process miss one window at once sends no info requests, and a longer
// one no more than a few at a time. Not run in parallel: it holds the
// process's checks.
func TestAliveChecksGatedAndBounded(t *testing.T) {
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

	// Hold every check of the process.
	for range cap(aliveChecks) {
		aliveChecks <- struct{}{}
	}
	held := true
	release := func() {
		if held {
			for range cap(aliveChecks) {
				<-aliveChecks
			}
			held = false
		}
	}
	defer release()

	r.failed(r.cc, jetstream.ErrNoHeartbeat)
	if r.checking.Load() {
		t.Fatal("one missed heartbeat window started a consumer check")
	}
	r.failed(r.cc, jetstream.ErrNoHeartbeat)
	if !r.checking.Load() {
		t.Fatal("a second missed window in a row started no consumer check")
	}
	// The check waits for a free slot: no request within half a second
	// (a wait that can only let a regression pass unseen on a slow
	// machine, never fail a correct reader).
	select {
	case m := <-infos:
		t.Fatalf("a consumer info request %q while the process's checks were all taken", m.Subject)
	case <-time.After(500 * time.Millisecond):
	}
	release()
	select {
	case <-infos:
	case <-time.After(10 * time.Second):
		t.Fatal("no consumer info request once a check was free")
	}
	select {
	case err := <-rd.Lost():
		t.Fatalf("a consumer that answers lost its reader: %v", err)
	default:
	}
}
