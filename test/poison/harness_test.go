package poison_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// wait bounds every poll: generous, for -race on a busy two-core machine.
const wait = 60 * time.Second

// env is one embedded nats-server with the topology, an ingress of
// deployment v1 on a real HTTP listener, and the owners a test starts.
type env struct {
	t     *testing.T
	url   string
	nc    *nats.Conn
	js    jetstream.JetStream
	store *kv.Store
	names subjects.Names
	srv   *httptest.Server
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
	e := &env{t: t, url: s.ClientURL(), nc: nc, js: js, store: store, names: subjects.Default()}
	inc, ijs := natstest.Connect(t, s.ClientURL())
	ing, err := ingress.New(ingress.Config{
		NC: inc, JS: ijs, Deployment: "v1", InsecureDev: true, StartTimeout: 10 * time.Second,
		Heartbeat: 200 * time.Millisecond, HubLinger: 100 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(ing.Handler())
	t.Cleanup(func() {
		ing.Close()
		e.srv.CloseClientConnections()
		e.srv.Close()
	})
	return e
}

// owner runs an in-process owner of deployment v1 with agent; it stops when
// the test ends.
func (e *env) owner(process string, agent runtime.Agent, mutate ...func(*pool.Config)) {
	e.t.Helper()
	nc, js := natstest.Connect(e.t, e.url)
	store, err := kv.Open(e.t.Context(), js, e.names)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := pool.Config{
		NC: nc, JS: js, Store: store, Names: e.names, Deployment: "v1", ProcessID: process,
		Agent: agent, TickInterval: 50 * time.Millisecond, LeaseTTL: 4 * time.Second,
		Log: slog.New(slog.NewTextHandler(tWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	o, err := pool.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = o.Run(ctx) }()
	var once sync.Once
	e.t.Cleanup(func() { once.Do(func() { cancel(); <-done }) })
	e.eventually("the owner's start responder", func() bool {
		_, err := e.nc.Request(e.names.Start("v1"), []byte(`{`), time.Second)
		return err == nil
	})
}

// call sends an HTTP request and returns the status and body.
func (e *env) call(method, path, body string) (int, []byte) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// create starts a session and returns its ID.
func (e *env) create() string {
	e.t.Helper()
	code, body := e.call("POST", "/v1/sessions", `{}`)
	if code != http.StatusCreated {
		e.t.Fatalf("create: %d %s", code, body)
	}
	var r struct{ SessionID string }
	_ = json.Unmarshal(body, &r)
	return r.SessionID
}

// receipt is a 202 answer to a delivery.
type receipt struct {
	SessionID string `json:"sessionId"`
	Seq       uint64 `json:"seq"`
}

// deliver sends text to session id and returns the status and receipt.
func (e *env) deliver(id, text string) (int, receipt) {
	e.t.Helper()
	body, _ := json.Marshal(map[string]string{"sessionId": id, "text": text})
	code, b := e.call("POST", "/v1/deliveries", string(body))
	var r receipt
	if code == http.StatusAccepted {
		if err := json.Unmarshal(b, &r); err != nil {
			e.t.Fatalf("receipt %s: %v", b, err)
		}
	}
	return code, r
}

// events returns the session's committed events through ?follow=false.
func (e *env) events(id string) []wire.Event {
	e.t.Helper()
	code, b := e.call("GET", "/v1/sessions/"+id+"/events?follow=false", "")
	if code != http.StatusOK {
		e.t.Fatalf("events of %s: %d %s", id, code, b)
	}
	var evs []wire.Event
	if err := json.Unmarshal(b, &evs); err != nil {
		e.t.Fatalf("events of %s: %v", id, err)
	}
	return evs
}

// waitEvents polls the session's events until pred holds.
func (e *env) waitEvents(id, what string, pred func([]wire.Event) bool) []wire.Event {
	e.t.Helper()
	var evs []wire.Event
	e.eventually(what, func() bool {
		evs = e.events(id)
		return pred(evs)
	})
	return evs
}

// sse reads the session's SSE stream until n events of kind arrived and
// returns every event read, by their SSE fields.
func (e *env) sse(id, kind string, n int) []sseEvent {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), wait)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/sessions/"+id+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var out []sseEvent
	var cur sseEvent
	seen := 0
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.kind = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		case line == "" && cur.kind != "":
			out = append(out, cur)
			if cur.kind == kind {
				seen++
			}
			if seen >= n {
				return out
			}
			cur = sseEvent{}
		}
	}
	e.t.Fatalf("SSE of %s ended after %d %s events (want %d): %v", id, seen, kind, n, sc.Err())
	return nil
}

type sseEvent struct{ id, kind, data string }

// record returns the session record as stored.
func (e *env) record(id string) record.Session {
	e.t.Helper()
	cur, err := e.store.GetSession(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return cur
}

func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %s waiting for %s", wait, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outputText is a message.output's text as a reader sees it (the ingress
// resolves out-of-line text).
func outputText(t *testing.T, ev wire.Event) string {
	t.Helper()
	var d wire.MessageOutput
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Ref != nil {
		t.Fatalf("event %d: message.output still holds a ref (%s): the ingress did not resolve it", ev.Seq, d.Ref.Digest)
	}
	return d.Text
}

// checkStream asserts the invariants every test here shares: seq contiguous
// from 1, every command applied at most once; it returns the applied
// commands' inbox sequences.
func checkStream(t *testing.T, evs []wire.Event) map[uint64]bool {
	t.Helper()
	applied := map[uint64]bool{}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: stream not contiguous", i+1, ev.Seq)
		}
		if ev.Kind == wire.EventCommandApplied {
			var d wire.CommandApplied
			_ = json.Unmarshal(ev.Data, &d)
			if applied[d.Seq] {
				t.Fatalf("command at seq %d applied twice", d.Seq)
			}
			applied[d.Seq] = true
		}
	}
	return applied
}

// errorsOf returns the error events' data.
func errorsOf(evs []wire.Event) []wire.ErrorData {
	var out []wire.ErrorData
	for _, ev := range evs {
		if ev.Kind == wire.EventErrorKind {
			var d wire.ErrorData
			_ = json.Unmarshal(ev.Data, &d)
			out = append(out, d)
		}
	}
	return out
}

func count(evs []wire.Event, kind string) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// stepLog counts Step calls per (session, step key): the proof that no step
// runs twice because of its result.
type stepLog struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *stepLog) Record(sessionID, stepKey, _ string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[string]int{}
	}
	l.n[sessionID+"/"+stepKey]++
}

// reruns lists the steps that ran more than once.
func (l *stepLog) reruns() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k, n := range l.n {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s ran %d times", k, n))
		}
	}
	return out
}
