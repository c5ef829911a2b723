package harness

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"syscall"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/natsd"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TB is what the harness needs of a test; *testing.T and *testing.B
// satisfy it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	TempDir() string
	Context() context.Context
	Failed() bool
}

// T is the harness for one test: each method does what the core function
// of its name does, fails the test where that returns an error, and
// registers what has to be stopped or closed when the test ends.
type T struct{ TB }

// For is the harness of test tb.
func For(tb TB) T { return T{tb} }

// Check fails the test if err is not nil.
func (t T) Check(err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%v", err)
	}
}

// Eventually polls cond until it holds, failing the test after timeout.
func (t T) Eventually(timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := Poll(t.Context(), timeout, cond); err != nil {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// Progressing waits until progress() reaches target and fails only when
// it stands still for stall: a long chain of round trips (hundreds of
// commands through one session) takes what the machine gives it, but a
// chain that stops fails. It logs the longest pause between two advances,
// the figure that tells a slow machine from a stall.
func (t T) Progressing(stall time.Duration, what string, target int, progress func() int) {
	t.Helper()
	last, lastAt, began := progress(), time.Now(), time.Now()
	var longest time.Duration
	for last < target {
		if !Sleep(t.Context(), Interval) {
			t.Fatalf("%s: %v", what, t.Context().Err())
		}
		now := time.Now()
		switch n := progress(); {
		case n > last:
			longest = max(longest, now.Sub(lastAt))
			last, lastAt = n, now
		case now.Sub(lastAt) > stall:
			t.Fatalf("%s: no progress for %s at %d of %d", what, stall, last, target)
		}
	}
	t.Logf("%s: %d in %s, longest pause between advances %s", what, target,
		time.Since(began).Round(time.Millisecond), longest.Round(time.Millisecond))
}

// Logger is a slog logger writing into the test's log at level.
func (t T) Logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(Writer{t.TB}, &slog.HandlerOptions{Level: level}))
}

// Writer writes each write as one line of a test's log.
type Writer struct{ TB TB }

func (w Writer) Write(p []byte) (int, error) {
	w.TB.Logf("%s", bytes.TrimSpace(p))
	return len(p), nil
}

// Server starts a server with a temporary store; it stops when the test
// ends.
func (t T) Server() *Server {
	t.Helper()
	s, err := StartServer(t.TempDir())
	t.Check(err)
	t.Cleanup(s.Shutdown)
	return s
}

// Cluster starts a restartable three-node cluster; it stops when the test
// ends.
func (t T) Cluster() *natsd.Nodes {
	t.Helper()
	c, err := StartCluster(t.TempDir())
	t.Check(err)
	t.Cleanup(c.Shutdown)
	return c
}

// Connect opens a connection that reconnects forever; it is closed when
// the test ends.
func (t T) Connect(url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, js, err := Connect(url)
	t.Check(err)
	t.Cleanup(nc.Close)
	return nc, js
}

// Dial connects an Env to url without the store.
func (t T) Dial(url string) *Env {
	t.Helper()
	e, err := Dial(url)
	t.Check(err)
	t.Cleanup(e.Close)
	return e
}

// Env connects to url, creates the topology (R1) and opens the store.
func (t T) Env(url string) *Env {
	t.Helper()
	e := t.Dial(url)
	t.Check(e.Ensure(t.Context(), topology.Config{}))
	return e
}

// Peer is another client of e's topology with a connection and store of
// its own (an in-process owner's).
func (t T) Peer(e *Env) *Env {
	t.Helper()
	p := t.Dial(e.URL)
	p.Names, p.Deployment = e.Names, e.Deployment
	t.Check(p.OpenStore(t.Context()))
	return p
}

// Ingress starts an in-process ingress on its own connection to url, with
// cfg; it stops when the test ends.
func (t T) Ingress(url string, cfg ingress.Config) *Ingress {
	t.Helper()
	return t.IngressWith(url, cfg, nil)
}

// IngressWith is Ingress with the handler wrapped by wrap
// (StartIngressWith).
func (t T) IngressWith(url string, cfg ingress.Config, wrap func(http.Handler) http.Handler) *Ingress {
	t.Helper()
	cfg.NC, cfg.JS = t.Connect(url)
	i, err := StartIngressWith(cfg, wrap)
	t.Check(err)
	t.Cleanup(i.Close)
	return i
}

// WatchRecords starts a RecordWatch; it stops when the test ends.
func (t T) WatchRecords(e *Env) *RecordWatch {
	t.Helper()
	rw, err := WatchRecords(t.Context(), e.JS, e.Names)
	t.Check(err)
	t.Cleanup(rw.Stop)
	return rw
}

// TailEvents starts a Tail; it stops when the test ends, and an event that
// did not decode fails the test.
func (t T) TailEvents(e *Env) *Tail {
	t.Helper()
	tl, err := TailEvents(t.Context(), e.JS, e.Names)
	t.Check(err)
	t.Cleanup(func() {
		tl.Stop()
		for _, p := range tl.Problems() {
			t.Errorf("%s", p)
		}
	})
	return tl
}

// SSE opens an SSE stream of url with header pairs; it is closed when the
// test ends.
func (t T) SSE(url string, opts ...Option) *Stream {
	t.Helper()
	s, err := OpenSSE(http.DefaultClient, url, opts...)
	t.Check(err)
	t.Cleanup(s.Close)
	return s
}

// CheckStream checks the stream (CheckStream) and returns the applied
// commands.
func (t T) CheckStream(evs []wire.Event) []wire.CommandApplied {
	t.Helper()
	applied, err := CheckStream(evs)
	t.Check(err)
	return applied
}

// Applied decodes the command.applied events (Applied), in event order.
func (t T) Applied(evs []wire.Event) []wire.CommandApplied {
	t.Helper()
	applied, err := Applied(evs)
	t.Check(err)
	return applied
}

// StepKeys lists the committed step keys (StepKeys).
func (t T) StepKeys(evs []wire.Event) []string {
	t.Helper()
	keys, err := StepKeys(evs)
	t.Check(err)
	return keys
}

// FirstData decodes the data of the first event of kind.
func FirstData[V any](tb TB, evs []wire.Event, kind string) V {
	tb.Helper()
	all := AllData[V](tb, evs, kind)
	if len(all) == 0 {
		tb.Fatalf("no %s event in %v", kind, Kinds(evs))
	}
	return all[0]
}

// AllData decodes the data of every event of kind.
func AllData[V any](tb TB, evs []wire.Event, kind string) []V {
	tb.Helper()
	all, err := All[V](evs, kind)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	return all
}

// LastData decodes the data of the last event of kind.
func LastData[V any](tb TB, evs []wire.Event, kind string) V {
	tb.Helper()
	all := AllData[V](tb, evs, kind)
	if len(all) == 0 {
		tb.Fatalf("no %s event in %v", kind, Kinds(evs))
	}
	return all[len(all)-1]
}

// Kill SIGKILLs p, waits for it to exit and returns when it was signalled.
func (t T) Kill(p *proctest.Proc, timeout time.Duration) time.Time {
	t.Helper()
	t.Check(Signal(p, syscall.SIGKILL))
	at := time.Now()
	p.Wait(t, timeout)
	return at
}

// Terminate SIGTERMs p and wants exit code 0.
func (t T) Terminate(name string, p *proctest.Proc, timeout time.Duration) {
	t.Helper()
	t.Check(Signal(p, syscall.SIGTERM))
	if code := p.Wait(t, timeout); code != 0 {
		t.Fatalf("%s: exit code %d after SIGTERM\n%s", name, code, LastLines(p.Output(), 40))
	}
}
