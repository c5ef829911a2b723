// Package agentapi_test drives the agent API end to end on a real embedded
// nats-server: ingresses on real HTTP listeners, in-process owners running
// the scripted agent, and the session's events and status read back the
// way a channel service reads them.
package agentapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/harness/inproc"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/wire"
)

// wait bounds every poll: generous, for -race on a busy two-core machine.
const wait = 60 * time.Second

type env struct {
	*harness.Env
	t     *testing.T
	h     harness.T
	ings  map[string]*harness.Ingress
	http  harness.Client
	agent *scripted
}

func newEnv(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	h := harness.For(t)
	return &env{Env: h.Env(h.Server().URL()), t: t, h: h, ings: map[string]*harness.Ingress{}, agent: &scripted{}}
}

// owner runs an in-process owner of deployment with the env's agent.
func (e *env) owner(deployment, process string, mutate ...func(*pool.Config)) *inproc.Owner {
	e.t.Helper()
	return inproc.Run(e.t, e.Env, deployment, process, append([]func(*pool.Config){func(c *pool.Config) {
		c.Agent, c.LeaseTTL, c.HibernateAfter = e.agent, 4*time.Second, -1
	}}, mutate...)...)
}

// ingress returns the ingress of deployment, starting it on first use.
func (e *env) ingress(deployment string) *harness.Ingress {
	if i, ok := e.ings[deployment]; ok {
		return i
	}
	i := e.h.Ingress(e.URL, ingress.Config{
		Deployment: deployment, InsecureDev: true, StartTimeout: 10 * time.Second,
		Heartbeat: 200 * time.Millisecond, HubLinger: 100 * time.Millisecond, Log: e.h.Logger(slog.LevelWarn),
	})
	e.ings[deployment] = i
	return i
}

// call sends an HTTP request to deployment's ingress and returns the status
// and body.
func (e *env) call(deployment, method, path, body string) (int, []byte) {
	e.t.Helper()
	r, err := e.http.Do(e.t.Context(), method, e.ingress(deployment).URL()+path, strings.NewReader(body))
	e.h.Check(err)
	return r.Code, r.Body
}

// create starts a session on deployment and returns its ID.
func (e *env) create(deployment string) string {
	e.t.Helper()
	code, body := e.call(deployment, "POST", "/v1/sessions", `{}`)
	if code != http.StatusCreated {
		e.t.Fatalf("create: %d %s", code, body)
	}
	var r ingress.Created
	e.h.Check(json.Unmarshal(body, &r))
	return r.SessionID
}

// deliver posts body (a JSON object without sessionId) to session id
// through deployment's ingress.
func (e *env) deliver(deployment, id, body string) {
	e.t.Helper()
	b := `{"sessionId":"` + id + `",` + strings.TrimPrefix(body, "{")
	if code, r := e.call(deployment, "POST", "/v1/deliveries", b); code != http.StatusAccepted {
		e.t.Fatalf("deliver %s: %d %s", b, code, r)
	}
}

// say delivers text.
func (e *env) say(deployment, id, text string) {
	e.t.Helper()
	b, _ := json.Marshal(map[string]string{"text": text})
	e.deliver(deployment, id, string(b))
}

// events returns the session's committed events (?follow=false).
func (e *env) events(id string) []wire.Event {
	e.t.Helper()
	code, b := e.call(e.anyIngress(), "GET", "/v1/sessions/"+id+"/events?follow=false", "")
	if code != http.StatusOK {
		e.t.Fatalf("events of %s: %d %s", id, code, b)
	}
	var evs []wire.Event
	e.h.Check(json.Unmarshal(b, &evs))
	return evs
}

func (e *env) anyIngress() string {
	for d := range e.ings {
		return d
	}
	return "v1"
}

// turns waits until n turns of session id completed and returns the
// events.
func (e *env) turns(id string, n int) []wire.Event {
	e.t.Helper()
	var evs []wire.Event
	e.h.Eventually(wait, "turns completed", func() bool {
		evs = e.events(id)
		return harness.Count(evs, wire.EventTurnCompleted) >= n
	})
	e.h.CheckStream(evs)
	return evs
}

// status reads GET /v1/sessions/{id}.
func (e *env) status(id string) ingress.Status {
	e.t.Helper()
	code, b := e.call(e.anyIngress(), "GET", "/v1/sessions/"+id, "")
	if code != http.StatusOK {
		e.t.Fatalf("status of %s: %d %s", id, code, b)
	}
	var st ingress.Status
	e.h.Check(json.Unmarshal(b, &st))
	return st
}

// completed returns the turn.completed data (version 2) in order.
func completed(t *testing.T, evs []wire.Event) []wire.TurnCompletedV2 {
	t.Helper()
	var out []wire.TurnCompletedV2
	for _, ev := range evs {
		if ev.Kind == wire.EventTurnCompleted {
			if ev.V != 2 {
				t.Fatalf("turn.completed at data version %d, want 2", ev.V)
			}
			d, err := wire.DecodeData[wire.TurnCompletedV2](ev)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
	}
	return out
}

// limits returns the limit.reached data in order.
func limits(t *testing.T, evs []wire.Event) []wire.LimitReached {
	t.Helper()
	return harness.AllData[wire.LimitReached](t, evs, wire.EventLimitReached)
}

func usage(in, out, cached int64, cost float64) runtime.Usage {
	return runtime.Usage{InputTokens: in, OutputTokens: out, CachedTokens: cached, CostUSD: cost}
}
