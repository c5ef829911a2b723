// Package remote_test runs sessions whose agent is remote: bin/owner
// --agent nats on a real embedded nats-server, an in-process ingress, and
// workers of package worker — nats.go and encoding/json only — serving the
// steps over the documented step protocol.
package remote_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/test/remote/worker"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
)

const (
	wait     = 60 * time.Second
	leaseTTL = 3 * time.Second
)

type env struct {
	*harness.Env
	t     *testing.T
	h     harness.T
	bin   string
	procs *harness.Procs
	logs  string
	ing   *harness.Ingress
	http  harness.Client

	effects atomic.Int64 // real executions of the "do" step's call
	mu      sync.Mutex
	served  map[string]int // steps served by worker name
	cancels []string       // tokens of steps a worker saw cancelled
	started chan string    // a "wait" step began (its token)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	h := harness.For(t)
	e := &env{Env: h.Env(h.Server().URL()), t: t, h: h, bin: proctest.Build(t, harness.OwnerPkg),
		procs: harness.NewProcs(t, 80), logs: t.TempDir(), served: map[string]int{}, started: make(chan string, 8)}
	e.ing = h.Ingress(e.URL, ingress.Config{
		Deployment: "v1", InsecureDev: true, StartTimeout: 20 * time.Second,
		Heartbeat: 200 * time.Millisecond, HubLinger: 100 * time.Millisecond, Log: h.Logger(slog.LevelWarn),
	})
	return e
}

// owner starts bin/owner --agent nats as process pid of v1.
func (e *env) owner(pid string, args ...string) *proctest.Proc {
	e.t.Helper()
	flags := harness.OwnerFlags(e.URL, "v1", pid, e.logs, leaseTTL, append([]string{"--agent", "nats"}, args...)...)
	return e.h.OwnerProc(e.procs, "owner "+pid, e.bin, flags, wait)
}

// worker starts a worker named name on a connection of its own.
func (e *env) worker(name string, mutate ...func(*worker.Worker)) *worker.Worker {
	e.t.Helper()
	nc, err := nats.Connect(e.URL, nats.MaxReconnects(-1))
	e.h.Check(err)
	e.t.Cleanup(nc.Close)
	w := &worker.Worker{NC: nc, Deployment: "v1"}
	w.Handle = func(s *worker.Step) worker.Reply {
		if s.Text() == "die" { // the worker's process dies with the step: its connection goes
			nc.Close()
			return nil
		}
		return e.handle(name, s)
	}
	for _, m := range mutate {
		m(w)
	}
	e.h.Check(w.Start())
	e.t.Cleanup(w.Close)
	return w
}

// handle is the test agent, by the step's text:
//
//	two       two steps, each streaming a delta
//	do        one journaled call (counted in effects), then its result
//	wait      waits for the owner's cancel
//	history   how many history entries the step saw, and in how many pages
//	die       the worker's connection closes (worker only)
//	anything  echoed
func (e *env) handle(name string, s *worker.Step) worker.Reply {
	e.mu.Lock()
	e.served[name]++
	e.mu.Unlock()
	switch text := s.Text(); {
	case text == "two" && s.Req.Step == 1:
		s.Delta("first ")
		return worker.Reply{"outcome": "continue", "history": []any{map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": "first"}}}}}
	case text == "" && s.Req.Step == 2:
		s.Delta("second")
		return worker.Output("two steps")
	case text == "do":
		res, err := s.Do("fetch", func(key string) (json.RawMessage, error) {
			n := e.effects.Add(1)
			return json.RawMessage(fmt.Sprintf(`{"n":%d,"key":%q}`, n, key)), nil
		})
		if err != nil {
			return worker.Reply{"error": err.Error()}
		}
		var r struct{ N int }
		_ = json.Unmarshal(res, &r)
		return worker.Output(fmt.Sprintf("fetched %d", r.N))
	case text == "wait":
		e.started <- s.Req.Token
		<-s.Context().Done()
		if s.Cancelled() {
			e.mu.Lock()
			e.cancels = append(e.cancels, s.Req.Token)
			e.mu.Unlock()
		}
		return nil
	case text == "history":
		entries, pages, err := s.History()
		if err != nil {
			return worker.Reply{"error": err.Error()}
		}
		return worker.Output(fmt.Sprintf("history %d entries in %d pages", len(entries), pages))
	default:
		return worker.Output("echo " + text)
	}
}

func (e *env) servedBy(name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.served[name]
}

func (e *env) cancelled() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.cancels...)
}

func (e *env) call(method, path, body string) (int, []byte) {
	e.t.Helper()
	r, err := e.http.Do(e.t.Context(), method, e.ing.URL()+path, strings.NewReader(body))
	e.h.Check(err)
	return r.Code, r.Body
}

func (e *env) create() string {
	e.t.Helper()
	code, body := e.call("POST", "/v1/sessions", `{}`)
	if code != http.StatusCreated {
		e.t.Fatalf("create: %d %s", code, body)
	}
	var r ingress.Created
	e.h.Check(json.Unmarshal(body, &r))
	return r.SessionID
}

func (e *env) say(id, text string) {
	e.t.Helper()
	b, _ := json.Marshal(map[string]string{"sessionId": id, "text": text})
	if code, r := e.call("POST", "/v1/deliveries", string(b)); code != http.StatusAccepted {
		e.t.Fatalf("deliver %s: %d %s", b, code, r)
	}
}

func (e *env) events(id string) []wire.Event {
	e.t.Helper()
	code, b := e.call("GET", "/v1/sessions/"+id+"/events?follow=false", "")
	if code != http.StatusOK {
		e.t.Fatalf("events of %s: %d %s", id, code, b)
	}
	var evs []wire.Event
	e.h.Check(json.Unmarshal(b, &evs))
	return evs
}

// turns waits until n turns of session id completed and returns the
// events, checked (seqs contiguous, every command applied once).
func (e *env) turns(id string, n int) []wire.Event {
	e.t.Helper()
	var evs []wire.Event
	e.h.Eventually(wait, fmt.Sprintf("%d turns completed", n), func() bool {
		evs = e.events(id)
		return harness.Count(evs, wire.EventTurnCompleted) >= n
	})
	e.h.CheckStream(evs)
	return evs
}

// errors are the session's error events.
func errorsOf(t *testing.T, evs []wire.Event) []wire.ErrorData {
	return harness.AllData[wire.ErrorData](t, evs, wire.EventErrorKind)
}

func lastOutput(evs []wire.Event) string {
	outs := harness.Outputs(evs)
	if len(outs) == 0 {
		return ""
	}
	return outs[len(outs)-1]
}
