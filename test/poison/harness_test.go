package poison_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/harness/inproc"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/wire"
)

// wait bounds every poll: generous, for -race on a busy two-core machine.
const wait = 60 * time.Second

// env is the suites' world (harness.World: one embedded nats-server with
// the topology, an ingress of deployment v1 on a real HTTP listener) and
// the owners a test starts.
type env struct {
	*harness.World
	t   *testing.T
	h   harness.T
	ing *harness.Ingress
}

func newEnv(t *testing.T) *env {
	t.Helper()
	w := harness.NewWorld(t, wait)
	return &env{World: w, t: t, h: w.T, ing: w.Ingress("v1")}
}

// owner runs an in-process owner of deployment v1 with agent; it stops when
// the test ends.
func (e *env) owner(process string, agent runtime.Agent, mutate ...func(*pool.Config)) {
	e.t.Helper()
	inproc.Run(e.t, e.Env, "v1", process, append([]func(*pool.Config){func(c *pool.Config) {
		c.Agent, c.LeaseTTL = agent, 4*time.Second
	}}, mutate...)...)
}

// call sends an HTTP request to the ingress and returns the status and body.
func (e *env) call(method, path, body string) (int, []byte) {
	e.t.Helper()
	return e.Call("v1", method, path, body)
}

// create starts a session and returns its ID.
func (e *env) create() string {
	e.t.Helper()
	return e.Create("v1")
}

// deliver sends text to session id and returns the status and receipt.
func (e *env) deliver(id, text string) (int, ingress.Receipt) {
	e.t.Helper()
	return e.Deliver("v1", id, text)
}

// events returns the session's committed events through ?follow=false.
func (e *env) events(id string) []wire.Event {
	e.t.Helper()
	return e.Events("v1", id)
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
func (e *env) sse(id, kind string, n int) []harness.Frame {
	e.t.Helper()
	s, err := harness.OpenSSE(http.DefaultClient, e.ing.URL()+"/v1/sessions/"+id+"/events")
	e.h.Check(err)
	defer s.Close()
	seen := 0
	got, err := s.Until(wait, fmt.Sprintf("%d %s events", n, kind), func(f harness.Frame) bool {
		if f.Event == kind {
			seen++
		}
		return seen >= n
	})
	if err != nil {
		e.t.Fatalf("SSE of %s: %v", id, err)
	}
	return got
}

// record returns the session record as stored.
func (e *env) record(id string) record.Session {
	e.t.Helper()
	cur, err := e.Store.GetSession(e.t.Context(), id)
	e.h.Check(err)
	return cur
}

func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	e.h.Eventually(wait, what, cond)
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
	for _, a := range harness.For(t).CheckStream(evs) {
		applied[a.Seq] = true
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
