// Package agentapi_test drives the agent API end to end on a real embedded
// nats-server: ingresses on real HTTP listeners, in-process owners running
// the scripted agent, and the session's events and status read back the
// way a channel service reads them.
package agentapi_test

import (
	"encoding/json"
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

// env is the suites' world (harness.World: one embedded nats-server with
// the topology, an ingress per deployment started on first use) and the
// scripted agent every owner of the test runs.
type env struct {
	*harness.World
	t     *testing.T
	h     harness.T
	agent *scripted
}

func newEnv(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	w := harness.NewWorld(t, wait)
	return &env{World: w, t: t, h: w.T, agent: &scripted{}}
}

// owner runs an in-process owner of deployment with the env's agent.
func (e *env) owner(deployment, process string, mutate ...func(*pool.Config)) *inproc.Owner {
	e.t.Helper()
	return inproc.Run(e.t, e.Env, deployment, process, append([]func(*pool.Config){func(c *pool.Config) {
		c.Agent, c.LeaseTTL, c.HibernateAfter = e.agent, 4*time.Second, -1
	}}, mutate...)...)
}

// call sends an HTTP request to deployment's ingress and returns the status
// and body.
func (e *env) call(deployment, method, path, body string) (int, []byte) {
	e.t.Helper()
	return e.Call(deployment, method, path, body)
}

// create starts a session on deployment and returns its ID.
func (e *env) create(deployment string) string {
	e.t.Helper()
	return e.Create(deployment)
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
	if code, _ := e.Deliver(deployment, id, text); code != http.StatusAccepted {
		e.t.Fatalf("deliver %q to %s: %d", text, id, code)
	}
}

// turns waits until n turns of session id completed and returns the
// events.
func (e *env) turns(id string, n int) []wire.Event {
	e.t.Helper()
	return e.Turns("v1", id, n)
}

// status reads GET /v1/sessions/{id}.
func (e *env) status(id string) ingress.Status {
	e.t.Helper()
	code, b := e.call("v1", "GET", "/v1/sessions/"+id, "")
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
