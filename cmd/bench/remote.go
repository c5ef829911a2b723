package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/runtime/remote"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// benchRemote: what running the agent on a worker (runtime/remote) costs,
// every figure against js_publish_consume_rtt. The worker is echoWorker:
// a raw nats.go responder on a connection of its own that answers each
// step at once.
//
//   - remote_step_rtt: one remote.Agent.Step called directly (no owner):
//     request out, the worker's reply decoded into a StepResult.
//     remote_step_rtt_16 is the same from 16 goroutines at once.
//   - nats_request_rtt: a core NATS request carrying the very bytes of a
//     step request to the same worker (nats.Conn.Request): the transport
//     floor of remote_step_rtt.
//   - inprocess_step: demo.Agent.Step of the same input, called directly.
//   - turn_rtt_inprocess, turn_rtt_remote: a delivery published to a
//     session's inbox → its message.output event on the session's events
//     subject, through an owner pool whose agent is the demo agent, or a
//     remote.Agent with the echo worker.
func benchRemote(ctx context.Context, e *env, r *bench.Reporter) error {
	w, err := startEchoWorker(e.url, subjects.Default(), "bench-step")
	if err != nil {
		return err
	}
	defer w.close()
	if err := benchRemoteStep(ctx, e, r, w); err != nil {
		return err
	}
	return benchTurnRTT(ctx, e, r)
}

// echoWorker answers every step request of its deployment at once with a
// message.output of the inputs' text, as the demo agent would (no
// heartbeats, no cancel subscription: the step is over before either
// matters). It decodes with encoding/json only, like a worker in another
// language.
type echoWorker struct {
	nc       *nats.Conn
	reqBytes atomic.Int64 // the size of the last request
	last     atomic.Value // []byte: the last request
}

func startEchoWorker(url string, names subjects.Names, dep string) (*echoWorker, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	w := &echoWorker{nc: nc}
	if _, err := nc.QueueSubscribe(names.AgentStep(dep), names.AgentQueueGroup(dep), w.serve); err != nil {
		nc.Close()
		return nil, err
	}
	if err := nc.Flush(); err != nil {
		nc.Close()
		return nil, err
	}
	return w, nil
}

func (w *echoWorker) close() { w.nc.Close() }

func (w *echoWorker) serve(m *nats.Msg) {
	w.reqBytes.Store(int64(len(m.Data)))
	w.last.Store(m.Data)
	var req struct {
		Inputs []struct {
			Text string `json:"text"`
		} `json:"inputs"`
	}
	_ = json.Unmarshal(m.Data, &req)
	texts := make([]string, 0, len(req.Inputs))
	for _, in := range req.Inputs {
		texts = append(texts, in.Text)
	}
	text := strings.Join(texts, "\n")
	b, _ := json.Marshal(map[string]any{
		"v": 1, "outcome": "done",
		"events":  []any{map[string]any{"kind": "message.output", "data": map[string]any{"text": text}}},
		"history": []any{map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": text}}}},
	})
	_ = m.Respond(b)
}

// stepInput is the first step of a turn with one delivered text.
func stepInput(i int) runtime.StepInput {
	id := fmt.Sprintf("c%d", i)
	return runtime.StepInput{SessionID: "s1", TurnID: "t-" + id, Step: 1,
		Inputs: []runtime.Command{{Seq: uint64(i + 1), ID: id, Kind: runtime.KindDeliver, Mode: "queue", Text: "hello " + id}}}
}

func benchRemoteStep(ctx context.Context, e *env, r *bench.Reporter, w *echoWorker) error {
	nc, err := nats.Connect(e.url) // the owner's connection
	if err != nil {
		return err
	}
	defer nc.Close()
	ag, err := remote.New(remote.Config{NC: nc, Names: subjects.Default(), Deployment: "bench-step"})
	if err != nil {
		return err
	}
	defer ag.Close()
	n := e.n(3000)
	samples, err := timeSteps(ctx, ag, n, 1)
	if err != nil {
		return err
	}
	size := w.reqBytes.Load()
	if err := benchRequestRTT(e, r, nc, w, n); err != nil {
		return err
	}
	r.Latencies("remote_step_rtt", samples, 0, bench.Baseline("js_publish_consume_rtt"), bench.Field("request_bytes", size))
	start := time.Now()
	if samples, err = timeSteps(ctx, ag, n, 16); err != nil {
		return err
	}
	r.Latencies("remote_step_rtt_16", samples, time.Since(start), bench.Baseline("js_publish_consume_rtt"), bench.Field("concurrent", 16))
	if samples, err = timeSteps(ctx, &demo.Agent{}, n, 1); err != nil {
		return err
	}
	r.Latencies("inprocess_step", samples, 0, bench.Baseline("js_publish_consume_rtt"))
	return nil
}

// timeSteps runs n steps of ag (after 100 of warm-up) from workers
// goroutines and times each Step call.
func timeSteps(ctx context.Context, ag runtime.Agent, n, workers int) ([]time.Duration, error) {
	var mu sync.Mutex
	samples := make([]time.Duration, 0, n)
	var next atomic.Int64
	var firstErr error
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)); i <= n+100; i = int(next.Add(1)) {
				t0 := time.Now()
				res, err := ag.Step(ctx, stepInput(i))
				d := time.Since(t0)
				if err == nil && (res.Error != "" || len(res.Events) != 1) {
					err = fmt.Errorf("step %d: error %q, %d events", i, res.Error, len(res.Events))
				}
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if i > 100 {
					samples = append(samples, d)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return samples, firstErr
}

// benchRequestRTT sends the worker's last step request again as a plain
// core NATS request, n times after 100 of warm-up.
func benchRequestRTT(e *env, r *bench.Reporter, nc *nats.Conn, w *echoWorker, n int) error {
	req, _ := w.last.Load().([]byte)
	subject := subjects.Default().AgentStep("bench-step")
	samples := make([]time.Duration, 0, n)
	for i := range n + 100 {
		t0 := time.Now()
		if _, err := nc.Request(subject, req, 10*time.Second); err != nil {
			return err
		}
		if i >= 100 {
			samples = append(samples, time.Since(t0))
		}
	}
	r.Latencies("nats_request_rtt", samples, 0, bench.Baseline("js_publish_consume_rtt"), bench.Field("request_bytes", len(req)))
	return nil
}

// turnsPerSession bounds a session's history in the turn benches (each
// turn adds two entries, and a remote step sends the history along).
const turnsPerSession = 20

// benchTurnRTT: delivery → message.output through an owner pool, first
// with the demo agent, then with a remote.Agent and the echo worker.
func benchTurnRTT(ctx context.Context, e *env, r *bench.Reporter) error {
	rg, err := newRigFor(ctx, e, "bench-inproc", "bench-inproc-1")
	if err != nil {
		return err
	}
	err = timeTurns(ctx, rg, r, "turn_rtt_inprocess")
	rg.close()
	if err != nil {
		return err
	}
	w, err := startEchoWorker(e.url, subjects.Default(), "bench-remote")
	if err != nil {
		return err
	}
	defer w.close()
	var ag *remote.Agent
	var agErr error
	rg, err = newRigFor(ctx, e, "bench-remote", "bench-remote-1", func(c *pool.Config) {
		// the owner's own connection, as owner.RemoteAgent's
		if ag, agErr = remote.New(remote.Config{NC: c.NC, Names: c.Names, Deployment: c.Deployment}); agErr == nil {
			c.Agent.(*probe).inner = ag
		}
	})
	if ag != nil {
		defer ag.Close()
	}
	if err != nil {
		return err
	}
	defer rg.close()
	if agErr != nil {
		return agErr
	}
	return timeTurns(ctx, rg, r, "turn_rtt_remote")
}

// timeTurns times e.n(300) turns (after 10 of warm-up) on sessions of
// turnsPerSession turns each.
func timeTurns(ctx context.Context, rg *rig, r *bench.Reporter, name string) error {
	n := rg.e.n(300)
	samples := make([]time.Duration, 0, n)
	var id string
	for i := range n + 10 {
		if i%turnsPerSession == 0 {
			var err error
			if id, err = rg.startSession(); err != nil {
				return err
			}
		}
		d, err := rg.deliverAndWaitOutput(ctx, id)
		if err != nil {
			return err
		}
		if i >= 10 {
			samples = append(samples, d)
		}
	}
	r.Latencies(name, samples, 0, bench.Baseline("js_publish_consume_rtt"), bench.Field("turns_per_session", turnsPerSession))
	return nil
}

// deliverAndWaitOutput publishes one delivery to an idle session and
// returns publish → its message.output event; it then waits until the
// turn has settled (session.waiting), as deliverAndWait does.
func (r *rig) deliverAndWaitOutput(ctx context.Context, sessionID string) (time.Duration, error) {
	id := nextID()
	text := "hello " + id
	return r.deliverAndWaitText(ctx, sessionID, id, text, text)
}

// deliverAndWaitText publishes delivery id with text and returns publish
// → the message.output whose text is want, then waits for the turn to
// settle.
func (r *rig) deliverAndWaitText(ctx context.Context, sessionID, id, text, wantText string) (time.Duration, error) {
	data, err := deliverCmdFrom(r.dep, id, text)
	if err != nil {
		return 0, err
	}
	output, w := make(chan time.Time, 1), newSettleWatch(id)
	want := []byte(`"text":"` + wantText + `"`)
	sub, err := r.e.nc.Subscribe(r.names.Events(sessionID), func(m *nats.Msg) {
		if bytes.Contains(m.Data, []byte(`"kind":"message.output"`)) && bytes.Contains(m.Data, want) {
			signal(output, time.Now())
		}
		w.see(m.Data)
	})
	if err != nil {
		return 0, err
	}
	defer sub.Unsubscribe()
	t0 := time.Now()
	if _, err := r.e.js.Publish(ctx, r.names.Inbox(sessionID), data, jetstream.WithMsgID(id)); err != nil {
		return 0, err
	}
	var d time.Duration
	select {
	case t := <-output:
		d = t.Sub(t0)
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("no message.output for %s", id)
	}
	select {
	case <-w.settled:
		return d, nil
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("turn of %s never settled", id)
	}
}

// signal sends v on ch unless it is full.
func signal[T any](ch chan T, v T) {
	select {
	case ch <- v:
	default:
	}
}
