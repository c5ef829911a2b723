package remote

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
)

const wait = 30 * time.Second

// newAgent is an Agent of deployment v1 on a fresh embedded server, and a
// second connection for a worker.
func newAgent(t *testing.T, mutate ...func(*Config)) (*Agent, *nats.Conn) {
	t.Helper()
	srv := natstest.Server(t)
	nc, _ := natstest.Connect(t, srv.ClientURL())
	wc, _ := natstest.Connect(t, srv.ClientURL())
	cfg := Config{NC: nc, Names: subjects.Default(), Deployment: "v1",
		UnavailableAfter: 300 * time.Millisecond, HeartbeatInterval: 50 * time.Millisecond, HeartbeatTimeout: 500 * time.Millisecond}
	for _, m := range mutate {
		m(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a, wc
}

// respond serves v1's step subject on wc with handle.
func respond(t *testing.T, wc *nats.Conn, handle func(req wire.AgentStepRequest, m *nats.Msg)) {
	t.Helper()
	sub, err := wc.QueueSubscribe("baton.agent.v1.step", "baton-agent-v1", func(m *nats.Msg) {
		var req wire.AgentStepRequest
		if err := wire.DecodeAgent("step_request", m.Data, &req); err != nil {
			t.Errorf("the owner's request is not valid: %v", err)
			return
		}
		handle(req, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := wc.Flush(); err != nil {
		t.Fatal(err)
	}
}

func input() runtime.StepInput {
	return runtime.StepInput{SessionID: "s1", TurnID: "t1", Step: 1,
		Inputs: []runtime.Command{{Seq: 1, ID: "c1", Kind: wire.KindDeliver, Text: "hi"}}}
}

func runStep(t *testing.T, a *Agent, ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return a.Step(ctx, in)
}

func TestReplies(t *testing.T) {
	a, wc := newAgent(t)
	replies := map[string]string{
		"hi":      `{"v":1,"outcome":"done","events":[{"kind":"message.output","data":{"text":"hello"}}],"task":null}`,
		"garbage": `not json`,
		"old":     `{"v":0,"outcome":"done"}`,
		"task":    `{"v":1,"outcome":"task","task":{"kind":"sleep","durationMs":1500,"input":{"a":1}}}`,
		"twice":   `{"v":1,"outcome":"done"}`,
	}
	respond(t, wc, func(req wire.AgentStepRequest, m *nats.Msg) {
		r := replies[req.Inputs[0].Text]
		_ = m.Respond([]byte(r))
		if req.Inputs[0].Text == "twice" {
			_ = m.Respond([]byte(`{"v":1,"outcome":"continue"}`))
		}
	})
	with := func(text string) runtime.StepInput {
		in := input()
		in.Inputs[0].Text = text
		return in
	}
	if r, err := runStep(t, a, t.Context(), with("hi")); err != nil || r.Outcome != runtime.OutcomeDone || len(r.Events) != 1 {
		t.Errorf("hi: %v %+v (a null task is an absent one)", err, r)
	}
	for _, text := range []string{"garbage", "old"} {
		if r, err := runStep(t, a, t.Context(), with(text)); err != nil || r.Code != runtime.CodeResultInvalid {
			t.Errorf("%s: %v %+v, want result_invalid", text, err, r)
		}
	}
	if r, _ := runStep(t, a, t.Context(), with("task")); r.Task == nil || r.Task.Duration != 1500*time.Millisecond || string(r.Task.Input) != `{"a":1}` {
		t.Errorf("task: %+v", r.Task)
	}
	if r, _ := runStep(t, a, t.Context(), with("twice")); r.Outcome != runtime.OutcomeDone {
		t.Errorf("twice: %+v, want the first reply", r)
	}
}

func TestUnavailableAndSilent(t *testing.T) {
	a, wc := newAgent(t)
	began := time.Now()
	r, err := runStep(t, a, t.Context(), input())
	if err != nil || r.Code != runtime.CodeAgentUnavailable || time.Since(began) < 300*time.Millisecond {
		t.Fatalf("no worker: %v %+v after %v, want agent_unavailable after the window", err, r, time.Since(began))
	}
	cancels := make(chan *nats.Msg, 4)
	cs, err := wc.ChanSubscribe("baton.agent.v1.cancel.*", cancels)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Unsubscribe()
	respond(t, wc, func(wire.AgentStepRequest, *nats.Msg) {}) // takes it, never answers
	r, err = runStep(t, a, t.Context(), input())
	if err != nil || r.Code != runtime.CodeAgentTimeout {
		t.Fatalf("a silent worker: %v %+v, want agent_timeout", err, r)
	}
	c := <-cancels
	var cancel wire.AgentCancel
	if err := wire.DecodeAgent("cancel", c.Data, &cancel); err != nil || cancel.Reason != wire.CodeAgentTimeout {
		t.Fatalf("cancel %s: %v", c.Data, err)
	}
}

// A heartbeating worker keeps a step alive past the heartbeat timeout; a
// cancelled step tells the worker.
func TestHeartbeatsAndCancel(t *testing.T) {
	a, wc := newAgent(t)
	respond(t, wc, func(req wire.AgentStepRequest, m *nats.Msg) {
		go func() {
			for range 15 { // 750 ms of heartbeats, past the 500 ms timeout
				_ = wc.Publish(req.Subjects.Heartbeat, nil)
				time.Sleep(50 * time.Millisecond) // the worker's pace, not a synchronisation
			}
			_ = m.Respond([]byte(`{"v":1,"outcome":"done"}`))
		}()
	})
	if r, err := runStep(t, a, t.Context(), input()); err != nil || r.Outcome != runtime.OutcomeDone {
		t.Fatalf("heartbeating worker: %v %+v", err, r)
	}

	a2, wc2 := newAgent(t)
	got := make(chan wire.AgentCancel, 1)
	respond(t, wc2, func(req wire.AgentStepRequest, m *nats.Msg) {
		_, _ = wc2.Subscribe(req.Subjects.Cancel, func(m *nats.Msg) {
			var c wire.AgentCancel
			_ = json.Unmarshal(m.Data, &c)
			got <- c
		})
		_ = wc2.Flush()
		_ = wc2.Publish(req.Subjects.Heartbeat, nil) // started: the test cancels now
	})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	var err error
	go func() { defer wg.Done(); _, err = a2.Step(ctx, input()) }()
	time.AfterFunc(100*time.Millisecond, cancel)
	wg.Wait()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled step: %v", err)
	}
	select {
	case c := <-got:
		if c.Reason != "cancelled" {
			t.Fatalf("cancel reason %q", c.Reason)
		}
	case <-time.After(wait):
		t.Fatal("the worker got no cancel")
	}
}

// Journal requests without a journal in the context run the call (as
// StepInput.Do does in a unit test); calls are sequential.
func TestJournalProtocol(t *testing.T) {
	a, wc := newAgent(t)
	type reply = wire.AgentJournalReply
	ask := func(subject, body string) reply {
		m, err := wc.Request(subject, []byte(body), wait)
		if err != nil {
			t.Fatal(err)
		}
		var r reply
		if err := wire.DecodeAgent("journal_reply", m.Data, &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	var begin, busy, rec, noCall reply
	respond(t, wc, func(req wire.AgentStepRequest, m *nats.Msg) {
		go func() {
			j := req.Subjects.Journal
			begin = ask(j, `{"v":1,"op":"begin","name":"model"}`)
			busy = ask(j, `{"v":1,"op":"begin","name":"other"}`)
			noCall = ask(j, `{"v":1,"op":"record","position":7,"result":1}`)
			rec = ask(j, `{"v":1,"op":"record","position":1,"result":{"answer":42}}`)
			_ = m.Respond([]byte(`{"v":1,"outcome":"done"}`))
		}()
	})
	if r, err := runStep(t, a, t.Context(), input()); err != nil || r.Outcome != runtime.OutcomeDone {
		t.Fatalf("step: %v %+v", err, r)
	}
	if begin.Recorded || begin.Position != 1 || begin.Key != runtime.EffectKey("s1", "t1", 1, 1, "model") {
		t.Errorf("begin: %+v", begin)
	}
	if busy.Failure == nil || busy.Failure.Code != codeJournalBusy {
		t.Errorf("a second begin: %+v", busy)
	}
	if noCall.Failure == nil || noCall.Failure.Code != codeNoCall {
		t.Errorf("record of no call: %+v", noCall)
	}
	if !rec.Recorded || string(rec.Result) != `{"answer":42}` {
		t.Errorf("record: %+v", rec)
	}
}

// A history over the inline bound, and parts over max_payload, go by
// reference and come back page by page, exactly.
func TestPartsByReference(t *testing.T) {
	a, _ := newAgent(t, func(c *Config) { c.InlineBytes = 1 << 10 })
	in := input()
	for range 30 {
		in.History = append(in.History, runtime.AssistantText(strings.Repeat("h", 60<<10)))
	}
	in.Inputs[0].Text = strings.Repeat("i", 600<<10)
	limit := int(a.cfg.NC.MaxPayload()) - payloadHeadroom
	in.State = json.RawMessage(`"` + strings.Repeat("s", limit-100) + `"`) // fits max_payload alone, not beside the rest
	s, err := a.newStep(t.Context(), in, "tok")
	if err != nil {
		t.Fatal(err)
	}
	defer s.stop()
	var req wire.AgentStepRequest
	if err := wire.DecodeAgent("step_request", s.req, &req); err != nil {
		t.Fatal(err)
	}
	if req.History != nil || req.HistoryRef == nil || req.HistoryRef.Count != 30 || req.InputsRef == nil || req.StateRef == nil {
		t.Fatalf("refs %+v %+v %+v", req.HistoryRef, req.InputsRef, req.StateRef)
	}
	if len(s.req) > int(a.cfg.NC.MaxPayload()) {
		t.Fatalf("request of %d bytes", len(s.req))
	}
	var items []json.RawMessage
	pages := 0
	for off := 0; ; pages++ {
		pg := s.page(wire.AgentHistoryRequest{V: 1, Token: "tok", Offset: off})
		if pg.Error != nil || pg.Total != 30 {
			t.Fatalf("page at %d: %+v", off, pg.Error)
		}
		items = append(items, pg.Items...)
		if pg.Next == nil {
			break
		}
		off = *pg.Next
	}
	if len(items) != 30 || pages < 2 {
		t.Fatalf("%d items in %d pages", len(items), pages+1)
	}
	for i, it := range items {
		var e wire.HistoryEntry
		if err := json.Unmarshal(it, &e); err != nil || runtime.EntryOf(e).Text() != in.History[i].Text() {
			t.Fatalf("item %d differs: %v", i, err)
		}
	}
	if pg := s.page(wire.AgentHistoryRequest{V: 1, Token: "tok", Part: "state"}); len(pg.Items) != 1 || string(pg.Items[0]) != string(in.State) {
		t.Fatal("the state page differs")
	}
	if pg := s.page(wire.AgentHistoryRequest{V: 1, Token: "tok", Offset: 31}); pg.Error == nil || pg.Error.Code != "invalid_offset" {
		t.Fatalf("past the end: %+v", pg.Error)
	}

	huge := input()
	huge.SessionID = strings.Repeat("x", 2<<20)
	if r, err := a.Step(t.Context(), huge); err != nil || r.Code != runtime.CodeAgentRequestTooLarge {
		t.Fatalf("a request that cannot fit: %v %+v", err, r)
	}
}

func TestConfig(t *testing.T) {
	srv := natstest.Server(t)
	nc, _ := natstest.Connect(t, srv.ClientURL())
	for _, c := range []Config{
		{Deployment: "v1"},
		{NC: nc},
		{NC: nc, Deployment: "v1", HeartbeatInterval: time.Second, HeartbeatTimeout: 1500 * time.Millisecond},
		{NC: nc, Deployment: "v1", UnavailableAfter: -time.Second},
	} {
		if _, err := New(c); !errors.Is(err, ErrConfig) {
			t.Errorf("New(%+v): %v, want ErrConfig", c, err)
		}
	}
}
