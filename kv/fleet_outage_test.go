package kv_test

import (
	"net"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natsd"
	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestFleetWatchOutlivesAnOutage: an owner that starts its fleet view
// while the server is down (a NATS node restarting) waits for it and then
// follows the fleet, instead of failing its start.
func TestFleetWatchOutlivesAnOutage(t *testing.T) {
	dir := t.TempDir()
	s := natstest.ServerIn(t, dir)
	ensure(t, s.ClientURL(), 1)
	nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.ReconnectBufSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	c := ctx(t)
	st, err := kv.Open(c, js, subjects.Default())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RegisterAgent(c, "dep-a", "support"); err != nil {
		t.Fatal(err)
	}
	port := s.Addr().(*net.TCPAddr).Port
	natsd.Shutdown(s)
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
	back, err := natsd.Start(natsd.Config{Dir: dir, Port: port, Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsd.Shutdown(back) })
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
