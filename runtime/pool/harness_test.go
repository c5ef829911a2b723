package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// env is one real embedded server with the topology, a store and a client.
type env struct {
	t     *testing.T
	url   string
	nc    *nats.Conn
	js    jetstream.JetStream
	store *kv.Store
	names subjects.Names
	log   *runtime.MemLog
	seq   atomic.Uint64
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s := natstest.Server(t)
	nc, js := natstest.Connect(t, s.ClientURL())
	if _, err := topology.Ensure(t.Context(), js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	store, err := kv.Open(t.Context(), js, subjects.Default())
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, url: s.ClientURL(), nc: nc, js: js, store: store, names: subjects.Default(), log: &runtime.MemLog{}}
}

// owner is one running Owner with its own connection.
type owner struct {
	*Owner
	cancel context.CancelFunc
	done   chan error
}

func (e *env) owner(deployment, process string, mutate ...func(*Config)) *owner {
	e.t.Helper()
	nc, js := natstest.Connect(e.t, e.url)
	store, err := kv.Open(e.t.Context(), js, e.names)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := Config{
		NC: nc, JS: js, Store: store, Names: e.names, Deployment: deployment, ProcessID: process,
		Agent: &demo.Agent{Log: e.log, Process: process}, TickInterval: 50 * time.Millisecond,
		// A TTL that a -race run on two cores never misses a renewal of.
		LeaseTTL: 4 * time.Second, SweepInterval: time.Second, TaskAckWait: 2 * time.Second,
		Log: slog.New(slog.NewTextHandler(tWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	o, err := New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &owner{Owner: o, cancel: cancel, done: make(chan error, 1)}
	go func() { w.done <- o.Run(ctx) }()
	e.t.Cleanup(w.stop)
	e.waitServing(deployment)
	return w
}

func (w *owner) stop() {
	w.cancel()
	<-w.done
	w.done <- nil // idempotent for Cleanup
}

func (e *env) waitServing(deployment string) {
	e.t.Helper()
	e.eventually(10*time.Second, "start responder of "+deployment, func() bool {
		_, err := e.nc.Request(e.names.Start(deployment), []byte(`{`), time.Second)
		return err == nil
	})
}

func (e *env) start(deployment string, aliases ...string) protocol.StartReply {
	e.t.Helper()
	req, _ := json.Marshal(protocol.StartRequest{DeploymentID: deployment, Aliases: aliases})
	msg, err := e.nc.Request(e.names.Start(deployment), req, 10*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	var r protocol.StartReply
	if err := json.Unmarshal(msg.Data, &r); err != nil || r.Error != nil {
		e.t.Fatalf("start: %v %+v", err, r.Error)
	}
	return r
}

// send publishes a command to an address's inbox subject and returns its seq.
func (e *env) send(addr string, c wire.Command) uint64 {
	e.t.Helper()
	if c.ID == "" {
		c.ID = fmt.Sprintf("c%d", e.seq.Add(1))
	}
	c.V, c.AcceptedAt = wire.CurrentVersion, time.Now().UTC()
	if c.AcceptedDeploymentID == "" {
		c.AcceptedDeploymentID = "v1"
	}
	data, err := wire.Encode(wire.Current(), c)
	if err != nil {
		e.t.Fatal(err)
	}
	tok, err := subjects.EncodeToken(addr)
	if err != nil {
		e.t.Fatal(err)
	}
	ack, err := e.js.Publish(e.t.Context(), e.names.Inbox(tok), data, jetstream.WithMsgID(c.ID))
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence
}

func deliver(text string) wire.Command {
	return wire.Command{Kind: wire.KindDeliver, Deliver: &wire.Deliver{Mode: wire.ModeQueue, Payloads: []wire.Payload{{Message: wire.TextMessage(text)}}}}
}

// events reads the session's whole public stream.
func (e *env) events(sessionID string) []wire.Event {
	e.t.Helper()
	c, err := e.js.OrderedConsumer(e.t.Context(), e.names.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{e.names.Events(sessionID)}})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []wire.Event
	for {
		batch, err := c.FetchNoWait(500)
		if err != nil {
			e.t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			ev, err := wire.DecodeEvent(nil, m.Data())
			if err != nil {
				e.t.Fatalf("event does not decode: %v", err)
			}
			out = append(out, ev)
		}
		if n == 0 {
			return out
		}
	}
}

// waitEvents polls until pred holds for the session's events.
func (e *env) waitEvents(sessionID string, timeout time.Duration, what string, pred func([]wire.Event) bool) []wire.Event {
	e.t.Helper()
	var evs []wire.Event
	e.eventually(timeout, what, func() bool {
		evs = e.events(sessionID)
		return pred(evs)
	})
	return evs
}

func (e *env) eventually(timeout time.Duration, what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func count(evs []wire.Event, kind string) int {
	n := 0
	for _, e := range evs {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func outputs(evs []wire.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Kind == wire.EventMessageOutput {
			var d struct{ Text string }
			_ = json.Unmarshal(e.Data, &d)
			out = append(out, d.Text)
		}
	}
	return out
}

// checkStream asserts the invariants every test shares: seq contiguous from
// 1, and every applied command applied exactly once.
func checkStream(t *testing.T, evs []wire.Event) map[string]uint64 {
	t.Helper()
	applied := map[string]uint64{}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: stream not contiguous", i+1, ev.Seq)
		}
		if ev.Kind == wire.EventCommandApplied {
			var d wire.CommandApplied
			_ = json.Unmarshal(ev.Data, &d)
			if _, dup := applied[d.CommandID]; dup {
				t.Fatalf("command %s applied twice", d.CommandID)
			}
			applied[d.CommandID] = d.Seq
		}
	}
	return applied
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
