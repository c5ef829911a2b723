package harness

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/wire"
)

// World is the recipe the end-to-end suites share (test/poison,
// test/agentapi, test/remote, …): one embedded nats-server with the
// topology (Env: NC, JS, Store, Names), an ingress per deployment on a
// real HTTP listener, started on first use with the suites' settings
// (IngressConfig), and an HTTP client bound to the test. The owners are
// the suite's own: in process (harness/inproc.Run) or subprocesses
// (Procs, OwnerProc).
type World struct {
	*Env
	T    T
	Wait time.Duration // bounds every poll

	http Client
	mu   sync.Mutex
	ings map[string]*Ingress
	cfg  func(deployment string) ingress.Config
}

// WorldOption changes a World's settings.
type WorldOption func(*World)

// WithIngress changes the configuration each deployment's ingress starts
// with (IngressConfig's, passed to mutate).
func WithIngress(mutate func(*ingress.Config)) WorldOption {
	return func(w *World) {
		base := w.cfg
		w.cfg = func(dep string) ingress.Config {
			c := base(dep)
			mutate(&c)
			return c
		}
	}
}

// NewWorld starts a server with the topology for t; wait bounds every poll.
func NewWorld(t TB, wait time.Duration, opts ...WorldOption) *World {
	t.Helper()
	return NewWorldAt(t, For(t).Server().URL(), wait, opts...)
}

// NewWorldAt is NewWorld on the server at url (its topology ensured).
func NewWorldAt(t TB, url string, wait time.Duration, opts ...WorldOption) *World {
	t.Helper()
	h := For(t)
	w := &World{Env: h.Env(url), T: h, Wait: wait, ings: map[string]*Ingress{}}
	w.cfg = func(dep string) ingress.Config { return IngressConfig(dep, h.Logger(slog.LevelWarn)) }
	for _, o := range opts {
		o(w)
	}
	return w
}

// IngressConfig is the suites' ingress of deployment: no auth, a start
// timeout for -race on two cores, quick heartbeats and hub linger.
func IngressConfig(deployment string, log *slog.Logger) ingress.Config {
	return ingress.Config{
		Deployment: deployment, InsecureDev: true, StartTimeout: 10 * time.Second,
		Heartbeat: 200 * time.Millisecond, HubLinger: 100 * time.Millisecond, Log: log,
	}
}

// Ingress returns deployment's ingress, starting it on first use.
func (w *World) Ingress(deployment string) *Ingress {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i, ok := w.ings[deployment]; ok {
		return i
	}
	i := w.T.Ingress(w.URL, w.cfg(deployment))
	w.ings[deployment] = i
	return i
}

// Call sends an HTTP request to deployment's ingress and returns the status
// and body.
func (w *World) Call(deployment, method, path, body string) (int, []byte) {
	w.T.Helper()
	r, err := w.http.Do(w.T.Context(), method, w.Ingress(deployment).URL()+path, strings.NewReader(body))
	w.T.Check(err)
	return r.Code, r.Body
}

// Create starts a session on deployment and returns its ID.
func (w *World) Create(deployment string) string {
	w.T.Helper()
	code, body := w.Call(deployment, "POST", "/v1/sessions", `{}`)
	if code != http.StatusCreated {
		w.T.Fatalf("create: %d %s", code, body)
	}
	var r ingress.Created
	w.T.Check(json.Unmarshal(body, &r))
	return r.SessionID
}

// Deliver posts text to session id through deployment's ingress and
// returns the status and, when accepted, the receipt.
func (w *World) Deliver(deployment, id, text string) (int, ingress.Receipt) {
	w.T.Helper()
	body, _ := json.Marshal(map[string]string{"sessionId": id, "text": text})
	code, b := w.Call(deployment, "POST", "/v1/deliveries", string(body))
	var r ingress.Receipt
	if code == http.StatusAccepted {
		if err := json.Unmarshal(b, &r); err != nil {
			w.T.Fatalf("receipt %s: %v", b, err)
		}
	}
	return code, r
}

// Events returns session id's committed events through deployment's
// ingress (?follow=false).
func (w *World) Events(deployment, id string) []wire.Event {
	w.T.Helper()
	code, b := w.Call(deployment, "GET", "/v1/sessions/"+id+"/events?follow=false", "")
	if code != http.StatusOK {
		w.T.Fatalf("events of %s: %d %s", id, code, b)
	}
	var evs []wire.Event
	if err := json.Unmarshal(b, &evs); err != nil {
		w.T.Fatalf("events of %s: %v", id, err)
	}
	return evs
}

// Turns waits until n turns of session id completed, checks the stream
// (harness.CheckStream) and returns its events.
func (w *World) Turns(deployment, id string, n int) []wire.Event {
	w.T.Helper()
	var evs []wire.Event
	w.T.Eventually(w.Wait, "turns completed", func() bool {
		evs = w.Events(deployment, id)
		return Count(evs, wire.EventTurnCompleted) >= n
	})
	w.T.CheckStream(evs)
	return evs
}
