package kv_test

import (
	"net"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natsd"
	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// outage is one server with the topology and a connection without a
// reconnect buffer: every request made while the server is down fails at
// once, as a request to a leader that went away fails on a cluster, so
// only a retry lands it. down stops the server; up starts it again on
// the same port and store.
type outage struct {
	t    *testing.T
	dir  string
	s    *server.Server
	port int
	js   jetstream.JetStream
}

func startOutage(t *testing.T) *outage {
	t.Helper()
	o := &outage{t: t, dir: t.TempDir()}
	o.s = natstest.ServerIn(t, o.dir)
	ensure(t, o.s.ClientURL(), 1)
	nc, err := nats.Connect(o.s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.ReconnectBufSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if o.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	o.port = o.s.Addr().(*net.TCPAddr).Port
	return o
}

func (o *outage) down() { natsd.Shutdown(o.s) }

func (o *outage) up() {
	o.t.Helper()
	back, err := natsd.Start(natsd.Config{Dir: o.dir, Port: o.port, Name: "test"})
	if err != nil {
		o.t.Fatal(err)
	}
	o.t.Cleanup(func() { natsd.Shutdown(back) })
}

// TestFleetWatchOutlivesAnOutage: an owner that starts its fleet view
// while the server is down (a NATS node restarting) waits for it and then
// follows the fleet, instead of failing its start.
func TestFleetWatchOutlivesAnOutage(t *testing.T) {
	o := startOutage(t)
	c := ctx(t)
	st, err := kv.Open(c, o.js, subjects.Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterAgent(c, "dep-a", "support"); err != nil {
		t.Fatal(err)
	}
	o.down()
	type watched struct {
		f   *kv.Fleet
		err error
	}
	done := make(chan watched, 1)
	go func() {
		f, err := st.WatchFleet(c, func(msg string, args ...any) { t.Log(append([]any{msg}, args...)...) })
		done <- watched{f, err}
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case w := <-done:
		t.Fatalf("the watch returned while the server was down: %v", w.err)
	default:
	}
	o.up()
	w := <-done
	if w.err != nil {
		t.Fatalf("fleet watch across the outage: %v", w.err)
	}
	select {
	case <-w.f.Loaded():
	case <-time.After(30 * time.Second):
		t.Fatal("the fleet view did not load after the outage")
	}
	if got := w.f.KnownAgent("dep-a"); got != "support" {
		t.Fatalf("the view after the outage: agent of dep-a %q", got)
	}
}
