package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/owner"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// wait bounds every wait of the integration tests: generous, for -race on
// a busy two-core machine.
const wait = 60 * time.Second

// deployment is the tests' deployment ID (make llm's).
const deployment = "llm1"

// stack is a real embedded NATS server, the fake model, an in-process
// ingress of the deployment and (startOwner) the example's owner.
type stack struct {
	t    *testing.T
	h    harness.T
	url  string // NATS
	fake *fake
	ing  *harness.Ingress
	http harness.Client
	wrap func(*Agent) runtime.Agent // startOwner's agent around the example's (nil: itself)
}

func newStack(t *testing.T) *stack {
	t.Helper()
	h := harness.For(t)
	srv := h.Server()
	st := &stack{t: t, h: h, url: srv.URL(), fake: newFake(t)}
	st.ing = h.Ingress(st.url, ingress.Config{Deployment: deployment, InsecureDev: true, StartTimeout: 10 * time.Second,
		Heartbeat: 200 * time.Millisecond, HubLinger: 100 * time.Millisecond, Log: h.Logger(slog.LevelWarn)})
	return st
}

// startOwner runs owner.Run in-process with the example's agent of the
// fake (mutated by mutate) until the test ends, and waits until it serves;
// the agent is closed after the owner stopped.
func (st *stack) startOwner(mutate ...func(*Config)) *Agent {
	st.t.Helper()
	cfg := DefaultConfig()
	cfg.SystemPrompt, cfg.Options = "You are terse.", st.fake.options()
	for _, m := range mutate {
		m(&cfg)
	}
	agent, err := New(cfg)
	st.h.Check(err)
	st.t.Cleanup(agent.Close) // after the owner's cleanup below
	var run runtime.Agent = agent
	if st.wrap != nil {
		run = st.wrap(agent)
	}
	oc := owner.DefaultConfig()
	oc.DeploymentID, oc.NATSURL, oc.ProcessID = deployment, st.url, "llm-inproc"
	oc.HibernateAfter, oc.DrainTimeout, oc.Logger = -1, time.Second, st.h.Logger(slog.LevelWarn)
	ready := make(chan string, 1)
	oc.Ready = func(url string) { ready <- url }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- owner.Run(ctx, oc, run) }()
	st.t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				st.t.Errorf("owner.Run: %v", err)
			}
		case <-time.After(wait):
			st.t.Errorf("owner.Run did not return within %s of the cancel", wait)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		st.t.Fatalf("owner.Run: %v", err)
	case <-time.After(wait):
		st.t.Fatalf("the owner did not serve within %s", wait)
	}
	return agent
}

// post sends body as JSON to path of the ingress and wants status want.
func (st *stack) post(path string, body any, want int, out any) {
	st.t.Helper()
	st.h.Check(st.http.Call(st.t.Context(), http.MethodPost, st.ing.URL()+path, body, want, out))
}

// session creates a session and opens its SSE stream.
func (st *stack) session() (string, *events) {
	st.t.Helper()
	var c ingress.Created
	st.post("/v1/sessions", map[string]any{}, http.StatusCreated, &c)
	s := st.h.SSE(st.ing.URL() + "/v1/sessions/" + c.SessionID + "/events")
	return c.SessionID, &events{t: st.t, s: s, seen: make(chan struct{}, 64)}
}

// say delivers text to session id.
func (st *stack) say(id, text string) {
	st.t.Helper()
	st.post("/v1/deliveries", map[string]string{"sessionId": id, "text": text}, http.StatusAccepted, nil)
}

// events reads one session's SSE stream: every frame read so far, and a
// signal on seen for each message.delta as it is read (the fake waits on
// it before it sends the next piece).
type events struct {
	t      *testing.T
	s      *harness.Stream
	frames []harness.Frame
	seen   chan struct{}
}

// until reads frames until pred holds for one and returns those read by
// this call.
func (e *events) until(what string, pred func(harness.Frame) bool) []harness.Frame {
	e.t.Helper()
	got, err := e.s.Until(wait, what, func(f harness.Frame) bool {
		if isDelta(f) {
			select {
			case e.seen <- struct{}{}:
			default:
			}
		}
		return pred(f)
	})
	e.frames = append(e.frames, got...)
	if err != nil {
		e.t.Fatalf("%v; read %s", err, describe(e.frames))
	}
	return got
}

// kind is a predicate: a frame of kind.
func kind(k string) func(harness.Frame) bool {
	return func(f harness.Frame) bool { return f.Event == k }
}

func isDelta(f harness.Frame) bool { return f.Event == wire.EventMessageDelta }

// liveData decodes a live frame's data (message.delta or
// message.discarded); a live frame with an id: line fails the test.
func liveData(t *testing.T, f harness.Frame) wire.MessageDelta {
	t.Helper()
	var ev wire.LiveEvent
	var d wire.MessageDelta
	if f.HasID || json.Unmarshal([]byte(f.Data), &ev) != nil || json.Unmarshal(ev.Data, &d) != nil || ev.Kind != f.Event {
		t.Fatalf("live frame %+v: want no id: line and a live event of its kind", f)
	}
	return d
}

// durable decodes a durable frame's data member into v; a durable frame
// without an id: line fails the test.
func durable(t *testing.T, f harness.Frame, v any) {
	t.Helper()
	var env struct {
		Kind string          `json:"kind"`
		Data json.RawMessage `json:"data"`
	}
	if !f.HasID || json.Unmarshal([]byte(f.Data), &env) != nil || json.Unmarshal(env.Data, v) != nil {
		t.Fatalf("durable frame %+v: want an id: line and data", f)
	}
}

// outputs are the texts of the message.output frames.
func outputs(t *testing.T, frames []harness.Frame) []string {
	var out []string
	for _, f := range frames {
		if f.Event == wire.EventMessageOutput {
			var d wire.MessageOutput
			durable(t, f, &d)
			out = append(out, d.Text)
		}
	}
	return out
}

func describe(frames []harness.Frame) string {
	var kinds []string
	for _, f := range frames {
		k := f.Event
		if isDelta(f) {
			k += "(" + f.Data[strings.LastIndex(f.Data, `"text":`):]
		}
		kinds = append(kinds, k)
	}
	return strings.Join(kinds, " ")
}

// procs runs the example's binary as owner processes of the stack.
type procs struct {
	st  *stack
	bin string
	ps  *harness.Procs
}

// binaryOwners builds the example's binary (once per test binary).
func (st *stack) binaryOwners() *procs {
	st.t.Helper()
	return &procs{st: st, bin: proctest.Build(st.t, "github.com/baton-rt/baton/examples/llm"), ps: harness.NewProcs(st.t, 60)}
}

// start runs owner process name against the fake model and the stack's
// NATS (lease TTL 2 s), with extra flags, and waits until it serves.
func (p *procs) start(name string, extra ...string) *proctest.Proc {
	p.st.t.Helper()
	args := append([]string{"OPENAI_BASE_URL=" + p.st.fake.srv.URL + "/v1", "OPENAI_API_KEY=test-key", p.bin,
		"--nats-url", p.st.url, "--deployment-id", deployment, "--process-id", name, "--lease-ttl", "2s",
		"--sweep-interval", "1s", "--log-format", "json", "--log-level", "debug"}, extra...)
	return p.st.h.OwnerProc(p.ps, name, "/usr/bin/env", args, wait) // env execs the binary: one process
}
