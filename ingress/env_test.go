package ingress_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/harness/inproc"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/wire"
	"github.com/prometheus/client_golang/prometheus"
)

const testToken = "test-token-1"

// env is one embedded server with the topology (harness.Env: NC, JS,
// Store, Names), an ingress on a real HTTP listener with its micro service,
// and helpers bound to the test. Owners are started per test (env.owner).
type env struct {
	*harness.Env
	t    *testing.T
	h    harness.T
	ing  *harness.Ingress
	reg  *prometheus.Registry
	http harness.Client
}

func newEnv(t *testing.T, mutate ...func(*ingress.Config)) *env {
	t.Helper()
	h := harness.For(t)
	e := &env{Env: h.Env(h.Server().URL()), t: t, h: h, reg: prometheus.NewRegistry()}
	cfg := ingress.Config{
		Deployment: "v1", Tokens: []string{"other-token", testToken},
		AdminTokens: []string{"admin-token"}, Registerer: e.reg, Heartbeat: 200 * time.Millisecond,
		HubLinger: 100 * time.Millisecond, StartTimeout: 10 * time.Second, // an owner answers late on a loaded machine
		Log: h.Logger(slog.LevelInfo),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	e.ing = h.IngressWith(e.URL, cfg, conformant(t))
	return e
}

// owner runs an in-process owner of deployment with the demo agent; it
// stops when the test ends.
func (e *env) owner(deployment, process string, mutate ...func(*pool.Config)) (stop func()) {
	e.t.Helper()
	o := inproc.Run(e.t, e.Env, deployment, process, mutate...)
	return func() { _ = o.Stop() }
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
	r, err := e.http.Do(e.t.Context(), method, e.ing.URL()+path, strings.NewReader(body), harness.Bearer(token), harness.Headers(hdr...))
	e.h.Check(err)
	return r.Code, r.Header, r.Body
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

// published waits until the session's event stream holds every event its
// record has committed (through the status's eventSeq) and returns them. A
// commit writes the record first and publishes its outbox after, so a
// state read from the record can be ahead of the stream.
func (e *env) published(id string) []wire.Event {
	e.t.Helper()
	return e.waitEvents(id, "the events "+id+" committed", func(evs []wire.Event) bool {
		seq := e.status(id).EventSeq
		return seq > 0 && len(evs) > 0 && evs[len(evs)-1].Seq == seq
	})
}

func (e *env) eventually(timeout time.Duration, what string, cond func() bool) {
	e.t.Helper()
	e.h.Eventually(timeout, what, cond)
}

// durable is what a request can have written: the last sequence of every
// stream (KV buckets are streams too), except the owners bucket, whose
// lease keys the owner processes renew all the time: there, the revision of
// every other key (session index entries, deployment records).
type durable map[string]uint64

func (e *env) durable() durable {
	e.t.Helper()
	out, err := e.LastSeqs(e.t.Context(), e.Names.InboxStream(), e.Names.EventsStream(),
		"KV_"+e.Names.SessionsBucket(), "KV_"+e.Names.HooksBucket(), "KV_"+ingress.ReceiptsBucket(e.Names))
	e.h.Check(err)
	owners, err := e.JS.KeyValue(e.t.Context(), e.Names.OwnersBucket())
	e.h.Check(err)
	for _, k := range liveKeys(e.t, e, e.Names.OwnersBucket()) {
		if strings.HasPrefix(k, "lease.") {
			continue
		}
		if en, err := owners.Get(e.t.Context(), k); err == nil {
			out[e.Names.OwnersBucket()+"/"+k] = en.Revision()
		}
	}
	return out
}

func applied(t *testing.T, evs []wire.Event) []wire.CommandApplied {
	t.Helper()
	return harness.AllData[wire.CommandApplied](t, evs, wire.EventCommandApplied)
}

// contiguous checks that events are seq 1.. (or from+1..) without a hole.
func contiguous(t *testing.T, evs []wire.Event, from uint64) {
	t.Helper()
	harness.For(t).Check(harness.Contiguous(evs, from))
}

// sse opens an SSE stream of path with the test token and header pairs.
func (e *env) sse(path string, hdr ...string) *harness.Stream {
	e.t.Helper()
	return e.h.SSE(e.ing.URL()+path, harness.Bearer(testToken), harness.Headers(hdr...))
}

// until reads s until pred holds for the frame just read.
func until(t *testing.T, s *harness.Stream, timeout time.Duration, what string, pred func(harness.Frame) bool) []harness.Frame {
	t.Helper()
	got, err := s.Until(timeout, what, pred)
	harness.For(t).Check(err)
	return got
}

func isOutput(text string) func(harness.Frame) bool {
	return func(f harness.Frame) bool {
		if f.Event != wire.EventMessageOutput {
			return false
		}
		var env struct{ Data wire.MessageOutput }
		_ = json.Unmarshal([]byte(f.Data), &env)
		return env.Data.Text == text
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func jsonBody(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
