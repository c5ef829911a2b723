package owner

import (
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// relayPrefix is the JetStream API prefix the tests' owner speaks: a
// relay forwards it to the server's own ($JS.API.), once it is started.
const relayPrefix = "$JSRELAY.API"

// relay answers relayPrefix's requests by forwarding them to the server's
// JetStream API, counting them in n.
func relay(nc *nats.Conn, n *atomic.Int64) (*nats.Subscription, error) {
	return nc.Subscribe(relayPrefix+".>", func(m *nats.Msg) {
		n.Add(1)
		reply, err := nc.Request(jetstream.DefaultAPIPrefix+strings.TrimPrefix(m.Subject, relayPrefix+"."), m.Data, 5*time.Second)
		if err == nil {
			_ = m.Respond(reply.Data)
		}
	})
}

// An owner whose JetStream does not answer yet (no responders: a cluster
// electing) waits for the session store instead of exiting: openStore
// retries until the API answers, then opens it. Before openStore, the
// owner exited at its first unanswered request ("kv: open bucket
// baton_owners: context deadline exceeded", seen under load).
func TestOpenStoreWaitsForJetStream(t *testing.T) {
	t.Parallel()
	s := natstest.Server(t)
	nc, js := natstest.Connect(t, s.ClientURL())
	if _, err := topology.Ensure(t.Context(), js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	rjs, err := jetstream.NewWithAPIPrefix(nc, relayPrefix)
	if err != nil {
		t.Fatal(err)
	}
	var forwarded atomic.Int64
	relayErr := make(chan error, 1)
	time.AfterFunc(700*time.Millisecond, func() {
		sub, err := relay(nc, &forwarded)
		if err == nil {
			t.Cleanup(func() { _ = sub.Unsubscribe() })
		}
		relayErr <- err
	})
	store, err := openStore(t.Context(), rjs, resolved{names: subjects.Default()}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("openStore: %v", err)
	}
	if err := <-relayErr; err != nil {
		t.Fatal(err)
	}
	if store == nil || forwarded.Load() == 0 {
		t.Fatalf("openStore returned store %v after %d answered requests", store, forwarded.Load())
	}
}

// An error that is not a missing answer is final at once: a store whose
// buckets do not exist is refused after one attempt.
func TestOpenStoreRefusesAtOnce(t *testing.T) {
	t.Parallel()
	s := natstest.Server(t)
	nc, _ := natstest.Connect(t, s.ClientURL())
	rjs, err := jetstream.NewWithAPIPrefix(nc, relayPrefix)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	sub, err := relay(nc, &n)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	_, err = openStore(t.Context(), rjs, resolved{names: subjects.Default()}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("openStore without buckets: %v, want the bucket's absence", err)
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("openStore sent %d requests for a missing bucket, want 1 (no retry)", got)
	}
}
