package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/internal/stages"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// probe wraps the demo agent and reports when a step begins for a command.
// A delivery "/journal <n>" makes n journaled calls (StepInput.Do) of an
// empty function instead, each timed into journal.
type probe struct {
	inner   runtime.Agent
	mu      sync.Mutex
	wait    map[string]chan time.Time
	steps   int
	journal []time.Duration
}

func newProbe() *probe { return &probe{inner: &demo.Agent{}, wait: map[string]chan time.Time{}} }

func (p *probe) EventKinds() []string { return p.inner.EventKinds() }

func (p *probe) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	now := time.Now()
	stages.Mark(in.SessionID, "step.started")
	p.mu.Lock()
	p.steps++
	for _, c := range in.Inputs {
		if ch, ok := p.wait[c.ID]; ok {
			ch <- now
			delete(p.wait, c.ID)
		}
	}
	p.mu.Unlock()
	if n, ok := journalCalls(in); ok {
		return p.doCalls(ctx, in, n)
	}
	return p.inner.Step(ctx, in)
}

// journalCalls reads a "/journal <n>" delivery.
func journalCalls(in runtime.StepInput) (int, bool) {
	if len(in.Inputs) != 1 || !strings.HasPrefix(in.Inputs[0].Text, "/journal ") {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(in.Inputs[0].Text, "/journal "))
	return n, err == nil
}

// doCalls makes n journaled calls, timing each Do (the call's function
// returns at once: what is timed is the journal write).
func (p *probe) doCalls(ctx context.Context, in runtime.StepInput, n int) (runtime.StepResult, error) {
	took := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := in.Do(ctx, "bench", func(context.Context, string) ([]byte, error) { return []byte("ok"), nil }); err != nil {
			return runtime.StepResult{}, err
		}
		took = append(took, time.Since(t0))
	}
	p.mu.Lock()
	p.journal = append(p.journal, took...)
	p.mu.Unlock()
	return runtime.StepResult{Outcome: runtime.OutcomeDone, Events: []runtime.Event{runtime.Output(fmt.Sprint(n, " calls"))}}, nil
}

func (p *probe) expect(id string) chan time.Time {
	ch := make(chan time.Time, 1)
	p.mu.Lock()
	p.wait[id] = ch
	p.mu.Unlock()
	return ch
}

// rig is an owner of deployment "bench" running in this process over its
// own TCP connection, plus a client connection that publishes.
type rig struct {
	e      *env
	names  subjects.Names
	probe  *probe
	owner  *pool.Owner
	cancel context.CancelFunc
	done   chan error
	nc     *nats.Conn
	dep    string
	store  *kv.Store
	ownAPI atomic.Uint64 // JetStream API requests the bench's own counting made
}

func newRig(ctx context.Context, e *env) (*rig, error) { return newRigFor(ctx, e, "bench", "bench-1") }

// newRigFor runs an owner of deployment dep as process proc; mutate
// adjusts its configuration.
func newRigFor(ctx context.Context, e *env, dep, proc string, mutate ...func(*pool.Config)) (*rig, error) {
	names := subjects.Default()
	if _, err := topology.Ensure(ctx, e.js, topology.Config{Names: names, MaxConsumers: 20_000}); err != nil {
		return nil, err
	}
	nc, err := nats.Connect(e.url)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	store, err := kv.Open(ctx, js, names)
	if err != nil {
		return nil, err
	}
	r := &rig{e: e, names: names, probe: newProbe(), nc: nc, done: make(chan error, 1), dep: dep, store: store}
	cfg := pool.Config{NC: nc, JS: js, Store: store, Names: names, Deployment: dep,
		ProcessID: proc, Agent: r.probe, Log: benchLogger()}
	for _, m := range mutate {
		m(&cfg)
	}
	r.owner, err = pool.New(cfg)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	go func() { r.done <- r.owner.Run(runCtx) }()
	return r, r.waitServing()
}

// waitServing waits until the owner answers on its start subject. An
// owner of a deployment an earlier suite used (the http suite's "bench",
// after the runtime suite's thousands of sessions) may take seconds to
// start on a slow machine: two seconds here failed one run in three of
// `make bench` on a 2-vCPU machine.
func (r *rig) waitServing() error {
	began := time.Now()
	deadline := began.Add(servingWait)
	for {
		_, err := r.e.nc.Request(r.names.Start(r.dep), []byte(`{`), time.Second)
		if err == nil {
			if d := time.Since(began); d > time.Second {
				fmt.Fprintf(os.Stderr, "bench: owner of %s serving after %s\n", r.dep, d.Round(time.Millisecond))
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("owner of %s not serving after %s: %w", r.dep, servingWait, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// servingWait bounds waitServing.
const servingWait = time.Minute

func (r *rig) close() {
	r.cancel()
	<-r.done
	r.nc.Close()
}

// startSessions starts n sessions one after another.
func (r *rig) startSessions(n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		id, err := r.startSession()
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	return ids, nil
}

func (r *rig) startSession() (string, error) {
	msg, err := r.e.nc.Request(r.names.Start(r.dep), []byte(`{"deploymentId":"`+r.dep+`"}`), 10*time.Second)
	if err != nil {
		return "", err
	}
	var rep protocol.StartReply
	if err := jsonUnmarshal(msg.Data, &rep); err != nil || rep.Error != nil {
		return "", fmt.Errorf("start: %v %v", err, rep.Error)
	}
	return rep.SessionID, nil
}

var cmdSeq struct {
	sync.Mutex
	n int
}

func nextID() string {
	cmdSeq.Lock()
	defer cmdSeq.Unlock()
	cmdSeq.n++
	return fmt.Sprintf("b%d", cmdSeq.n)
}

func deliverCmd(id, text string) ([]byte, error) { return deliverCmdFrom("bench", id, text) }

// deliverCmdFrom is a delivery accepted by deployment dep.
func deliverCmdFrom(dep, id, text string) ([]byte, error) {
	return wire.Encode(wire.Current(), wire.Command{
		V: wire.CurrentVersion, Kind: wire.KindDeliver, ID: id, AcceptedDeploymentID: dep,
		AcceptedAt: time.Now().UTC(),
		Deliver:    &wire.Deliver{Mode: wire.ModeQueue, Payloads: []wire.Payload{{Message: wire.TextMessage(text)}}},
	})
}

// deliverAndWait publishes one delivery to an idle session and returns
// publish → step start; it then waits until the turn has settled (its
// session.waiting event is on the stream), so the next delivery again finds
// the session idle.
func (r *rig) deliverAndWait(ctx context.Context, sessionID string) (time.Duration, error) {
	return r.deliverFromAndWait(ctx, sessionID, r.dep)
}

// deliverFromAndWait is deliverAndWait for a delivery accepted by deployment
// dep; r must be the owner expected to run the step (after a handoff, the
// target's).
func (r *rig) deliverFromAndWait(ctx context.Context, sessionID, dep string) (time.Duration, error) {
	return r.deliverTextFromAndWait(ctx, sessionID, dep, "")
}

// deliverTextAndWait is deliverAndWait with the delivery's text.
func (r *rig) deliverTextAndWait(ctx context.Context, sessionID, text string) (time.Duration, error) {
	return r.deliverTextFromAndWait(ctx, sessionID, r.dep, text)
}

func (r *rig) deliverTextFromAndWait(ctx context.Context, sessionID, dep, text string) (time.Duration, error) {
	id := nextID()
	if text == "" {
		text = "hello " + id
	}
	data, err := deliverCmdFrom(dep, id, text)
	if err != nil {
		return 0, err
	}
	w := newSettleWatch(id)
	sub, err := r.e.nc.Subscribe(r.names.Events(sessionID), func(m *nats.Msg) { w.see(m.Data) })
	if err != nil {
		return 0, err
	}
	defer sub.Unsubscribe()
	ch := r.probe.expect(id)
	stages.Start(sessionID)
	t0 := time.Now()
	if _, err := r.e.js.Publish(ctx, r.names.Inbox(sessionID), data, jetstream.WithMsgID(id)); err != nil {
		return 0, err
	}
	stages.Mark(sessionID, "published")
	var d time.Duration
	select {
	case t := <-ch:
		d = t.Sub(t0)
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("step for %s never started", id)
	}
	select {
	case <-w.settled:
		return d, nil
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("turn of %s never settled", id)
	}
}

// settleWatch follows a session's events as a core NATS subscriber gets
// them and reports (settled) when the turn that command id started has
// settled: a session.waiting after that turn's turn.started. Only the
// order of the events' seqs counts: a core subscriber also gets an event
// a successor re-publishes from its predecessor's outbox around a handoff
// (the stream keeps one copy, core NATS delivers both), and an older
// session.waiting taken for this turn's let the bench send its next
// delivery to a busy session, which then ran it without a handoff.
// Handlers of one subscription run one at a time, so it needs no lock.
type settleWatch struct {
	id      string
	started uint64 // the seq of id's turn.started (0: not yet)
	settled chan struct{}
}

func newSettleWatch(id string) *settleWatch {
	return &settleWatch{id: id, settled: make(chan struct{}, 1)}
}

// see reads one event.
func (w *settleWatch) see(data []byte) {
	var ev struct {
		Seq  uint64 `json:"seq"`
		Kind string `json:"kind"`
		Data struct {
			CommandID string `json:"commandId"`
		} `json:"data"`
	}
	if json.Unmarshal(data, &ev) != nil {
		return
	}
	switch {
	case ev.Kind == wire.EventTurnStarted && ev.Data.CommandID == w.id:
		w.started = ev.Seq
	case ev.Kind == wire.EventSessionWaiting && w.started != 0 && ev.Seq > w.started:
		signal(w.settled, struct{}{})
	}
}

// benchLogger discards the owner's logs unless BENCH_LOG=1.
func benchLogger() *slog.Logger {
	if os.Getenv("BENCH_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}
