package ingress_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

const testToken = "test-token-1"

// env is one embedded server with the topology, an ingress on a real HTTP
// listener (httptest) with its micro service, and helpers. Owners are
// started per test (env.owner).
type env struct {
	t     *testing.T
	url   string
	nc    *nats.Conn
	js    jetstream.JetStream
	store *kv.Store
	names subjects.Names
	ing   *ingress.Server
	srv   *httptest.Server
	reg   *prometheus.Registry
}

func newEnv(t *testing.T, mutate ...func(*ingress.Config)) *env {
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
	e := &env{t: t, url: s.ClientURL(), nc: nc, js: js, store: store, names: subjects.Default(), reg: prometheus.NewRegistry()}
	inc, ijs := natstest.Connect(t, s.ClientURL())
	cfg := ingress.Config{
		NC: inc, JS: ijs, Deployment: "v1", Tokens: []string{"other-token", testToken},
		AdminTokens: []string{"admin-token"}, Registerer: e.reg, Heartbeat: 200 * time.Millisecond,
		HubLinger: 100 * time.Millisecond, StartTimeout: 3 * time.Second,
		Log: slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	if e.ing, err = ingress.New(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := e.ing.Micro(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(e.ing.Handler())
	t.Cleanup(func() {
		e.ing.Close()
		e.srv.CloseClientConnections()
		e.srv.Close()
		_ = svc.Stop()
		cancel()
	})
	return e
}

// owner runs an in-process owner of deployment with the demo agent, as
// runtime/pool's harness does; it stops when the test ends.
func (e *env) owner(deployment, process string, mutate ...func(*pool.Config)) (stop func()) {
	e.t.Helper()
	nc, js := natstest.Connect(e.t, e.url)
	store, err := kv.Open(e.t.Context(), js, e.names)
	if err != nil {
		e.t.Fatal(err)
	}
	cfg := pool.Config{
		NC: nc, JS: js, Store: store, Names: e.names, Deployment: deployment, ProcessID: process,
		Agent: &demo.Agent{Log: &runtime.MemLog{}, Process: process}, TickInterval: 50 * time.Millisecond,
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
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	e.eventually(10*time.Second, "start responder of "+deployment, func() bool {
		_, err := e.nc.Request(e.names.Start(deployment), []byte(`{`), time.Second)
		return err == nil
	})
	return stop
}

// call sends an HTTP request with the test token (token "" sends none).
func (e *env) call(method, path, body, token string, hdr ...string) (int, []byte) {
	e.t.Helper()
	code, _, b := e.callHeader(method, path, body, token, hdr...)
	return code, b
}

// callHeader is call, with the answer's header.
func (e *env) callHeader(method, path, body, token string, hdr ...string) (int, http.Header, []byte) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(e.t.Context(), method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func (e *env) post(path, body string) (int, []byte) {
	e.t.Helper()
	return e.call(http.MethodPost, path, body, testToken)
}

// must posts and decodes a success answer of the wanted status into v.
func (e *env) must(path, body string, want int, v any) {
	e.t.Helper()
	code, b := e.post(path, body)
	if code != want {
		e.t.Fatalf("POST %s %s = %d %s, want %d", path, body, code, b, want)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			e.t.Fatalf("POST %s: %v: %s", path, err, b)
		}
	}
}

func (e *env) deliver(body string) ingress.Receipt {
	e.t.Helper()
	var r ingress.Receipt
	e.must("/v1/deliveries", body, http.StatusAccepted, &r)
	return r
}

func (e *env) create(body string) ingress.Created {
	e.t.Helper()
	var c ingress.Created
	e.must("/v1/sessions", body, http.StatusCreated, &c)
	return c
}

func (e *env) status(id string) ingress.Status {
	e.t.Helper()
	code, b := e.call(http.MethodGet, "/v1/sessions/"+id, "", testToken)
	if code != http.StatusOK {
		e.t.Fatalf("status %s = %d %s", id, code, b)
	}
	var st ingress.Status
	if err := json.Unmarshal(b, &st); err != nil {
		e.t.Fatal(err)
	}
	return st
}

// events reads a session's committed events through ?follow=false.
func (e *env) events(id string, after uint64) []wire.Event {
	e.t.Helper()
	code, b := e.call(http.MethodGet, fmt.Sprintf("/v1/sessions/%s/events?follow=false&after=%d", id, after), "", testToken)
	if code != http.StatusOK {
		e.t.Fatalf("events %s = %d %s", id, code, b)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(b, &raws); err != nil {
		e.t.Fatalf("events %s: %v: %s", id, err, b)
	}
	out := make([]wire.Event, len(raws))
	for i, raw := range raws {
		ev, err := wire.DecodeEvent(nil, raw)
		if err != nil {
			e.t.Fatalf("event does not decode: %v", err)
		}
		out[i] = ev
	}
	return out
}

func (e *env) waitEvents(id string, what string, pred func([]wire.Event) bool) []wire.Event {
	e.t.Helper()
	var evs []wire.Event
	e.eventually(20*time.Second, what, func() bool {
		evs = e.events(id, 0)
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

// durable is what a request can have written: the last sequence of every
// stream (KV buckets are streams too), except the owners bucket, whose
// lease keys the owner processes renew all the time: there, the revision of
// every other key (session index entries, deployment records).
type durable map[string]uint64

func (e *env) durable() durable {
	e.t.Helper()
	out := durable{}
	for _, name := range []string{
		e.names.InboxStream(), e.names.EventsStream(),
		"KV_" + e.names.SessionsBucket(), "KV_" + e.names.HooksBucket(), "KV_" + ingress.ReceiptsBucket(e.names),
	} {
		st, err := e.js.Stream(e.t.Context(), name)
		if err != nil {
			e.t.Fatalf("stream %s: %v", name, err)
		}
		info, err := st.Info(e.t.Context())
		if err != nil {
			e.t.Fatal(err)
		}
		out[name] = info.State.LastSeq
	}
	owners, err := e.js.KeyValue(e.t.Context(), e.names.OwnersBucket())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, k := range liveKeys(e.t, e, e.names.OwnersBucket()) {
		if strings.HasPrefix(k, "lease.") {
			continue
		}
		if en, err := owners.Get(e.t.Context(), k); err == nil {
			out[e.names.OwnersBucket()+"/"+k] = en.Revision()
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

func outputs(evs []wire.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Kind == wire.EventMessageOutput {
			var d wire.MessageOutput
			_ = json.Unmarshal(ev.Data, &d)
			out = append(out, d.Text)
		}
	}
	return out
}

func applied(t *testing.T, evs []wire.Event) []wire.CommandApplied {
	t.Helper()
	var out []wire.CommandApplied
	for _, ev := range evs {
		if ev.Kind == wire.EventCommandApplied {
			d, err := wire.DecodeData[wire.CommandApplied](ev)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	return out
}

func data[T any](t *testing.T, evs []wire.Event, kind string) T {
	t.Helper()
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == kind {
			d, err := wire.DecodeData[T](evs[i])
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatalf("no %s event", kind)
	var zero T
	return zero
}

// contiguous checks that events are seq 1.. (or from+1..) without a hole.
func contiguous(t *testing.T, evs []wire.Event, from uint64) {
	t.Helper()
	for i, ev := range evs {
		if ev.Seq != from+uint64(i)+1 {
			t.Fatalf("event %d has seq %d, want %d", i, ev.Seq, from+uint64(i)+1)
		}
	}
}

// sseEvent is one parsed SSE event.
type sseEvent struct {
	id   uint64
	kind string
	data string
}

// sseClient reads an SSE response into a channel until it ends.
type sseClient struct {
	resp   *http.Response
	events chan sseEvent
	done   chan struct{}
	pings  int
	mu     sync.Mutex
}

func (e *env) sse(path string, hdr ...string) *sseClient {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		e.t.Fatalf("SSE %s = %d %s", path, resp.StatusCode, b)
	}
	c := &sseClient{resp: resp, events: make(chan sseEvent, 4096), done: make(chan struct{})}
	go c.read()
	e.t.Cleanup(func() { cancel(); c.close() })
	return c
}

func (c *sseClient) read() {
	defer close(c.done)
	defer close(c.events)
	sc := bufio.NewScanner(c.resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var ev sseEvent
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.kind != "" {
				ev.data = strings.Join(data, "\n")
				c.events <- ev
			}
			ev, data = sseEvent{}, nil
		case strings.HasPrefix(line, ":"):
			c.mu.Lock()
			c.pings++
			c.mu.Unlock()
		case strings.HasPrefix(line, "id: "):
			ev.id, _ = strconv.ParseUint(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			ev.kind = line[7:]
		case strings.HasPrefix(line, "data: "):
			data = append(data, line[6:])
		}
	}
}

func (c *sseClient) close() {
	c.resp.Body.Close()
	<-c.done
}

// until reads events until pred holds for the one just read.
func (c *sseClient) until(t *testing.T, timeout time.Duration, what string, pred func(sseEvent) bool) []sseEvent {
	t.Helper()
	var got []sseEvent
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-c.events:
			if !ok {
				t.Fatalf("SSE stream ended before %s (got %d events)", what, len(got))
			}
			got = append(got, ev)
			if pred(ev) {
				return got
			}
		case <-deadline:
			t.Fatalf("timed out waiting for %s on SSE (got %d events)", what, len(got))
		}
	}
}

func isOutput(text string) func(sseEvent) bool {
	return func(ev sseEvent) bool {
		if ev.kind != wire.EventMessageOutput {
			return false
		}
		var env struct{ Data wire.MessageOutput }
		_ = json.Unmarshal([]byte(ev.data), &env)
		return env.Data.Text == text
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func jsonBody(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimSpace(p)))
	return len(p), nil
}
