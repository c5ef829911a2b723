// Package remote_test runs sessions whose agent is remote: bin/owner
// --agent nats on a real embedded nats-server, an in-process ingress, and
// workers of package worker — nats.go and encoding/json only — serving the
// steps over the documented step protocol.
package remote_test

import (
	"encoding/json"
	"fmt"
	"net/http"
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
	*harness.World
	t     *testing.T
	h     harness.T
	bin   string
	procs *harness.Procs
	logs  string
	ing   *harness.Ingress

	effects atomic.Int64 // real executions of the "do" step's call
	mu      sync.Mutex
	served  map[string]int // steps served by worker name
	cancels []string       // tokens of steps a worker saw cancelled
	started chan string    // a "wait" step began (its token)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	return newEnvAt(t, "")
}

// newEnvAt is the environment on the server at url ("": a server of its
// own): bin/owner and the ingress connect as url says.
func newEnvAt(t *testing.T, url string) *env {
	t.Helper()
	slow := harness.WithIngress(func(c *ingress.Config) { c.StartTimeout = 20 * time.Second })
	var w *harness.World
	if url == "" {
		w = harness.NewWorld(t, wait, slow)
	} else {
		w = harness.NewWorldAt(t, url, wait, slow)
	}
	return &env{World: w, t: t, h: w.T, bin: proctest.Build(t, harness.OwnerPkg), procs: harness.NewProcs(t, 80),
		logs: t.TempDir(), served: map[string]int{}, started: make(chan string, 8), ing: w.Ingress("v1")}
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
	return e.Call("v1", method, path, body)
}

func (e *env) create() string {
	e.t.Helper()
	return e.Create("v1")
}

func (e *env) say(id, text string) {
	e.t.Helper()
	if code, _ := e.Deliver("v1", id, text); code != http.StatusAccepted {
		e.t.Fatalf("deliver %q to %s: %d", text, id, code)
	}
}

func (e *env) events(id string) []wire.Event {
	e.t.Helper()
	return e.Events("v1", id)
}

// turns waits until n turns of session id completed and returns the
// events, checked (seqs contiguous, every command applied once).
func (e *env) turns(id string, n int) []wire.Event {
	e.t.Helper()
	return e.Turns("v1", id, n)
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
