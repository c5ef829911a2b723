package handoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The compile-time checks: kv implements what handoff declares.
var (
	_ handoff.Store  = (*kv.Store)(nil)
	_ handoff.Reader = (*kv.Store)(nil)
)

var names = subjects.Default()

func testCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// ensure creates the topology, retrying while a fresh cluster settles.
func ensure(t *testing.T, js jetstream.JetStream, replicas int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := topology.Ensure(c, js, topology.Config{Replicas: replicas})
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("topology: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// openStore opens the store, each attempt bounded by 5 s and retried for
// up to a minute: on a fresh cluster a JetStream API request can go
// unanswered (its meta leader still settling), which a single open would
// wait out to its deadline.
func openStore(t *testing.T, js jetstream.JetStream) *kv.Store {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := kv.Open(c, js, names)
		cancel()
		if err == nil {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("kv: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// natsServer is one embedded server with Baton's topology.
type natsServer struct {
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
	st  *kv.Store
}

func newNATS(t *testing.T) *natsServer {
	s := natstest.Server(t)
	nc, js := natstest.Connect(t, s.ClientURL())
	ensure(t, js, 1)
	return &natsServer{url: s.ClientURL(), nc: nc, js: js, st: openStore(t, js)}
}

func (n *natsServer) backend(t *testing.T) *backend {
	return &backend{
		name: "nats", store: n.st, backlog: kv.NewBacklog(n.js, names),
		publish: func(tt tb, tok string) uint64 {
			ack, err := n.js.Publish(testCtx(t), names.Inbox(tok), []byte(`{"cmd":"test"}`))
			if err != nil {
				tt.Errorf("publish: %v", err)
				return 0
			}
			return ack.Sequence
		},
		holds: func(_ tb, seq uint64) bool {
			m, err := kv.NewStream(n.js, names.InboxStream()).Get(testCtx(t), seq)
			return err == nil && m.Sequence == seq
		},
	}
}
