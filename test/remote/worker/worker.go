// Package worker is a Baton remote-agent worker written against the
// documented step protocol alone (docs/agent.md, "Writing an agent in
// another language"): it imports nats.go and encoding/json and no Baton
// package, so it is what a worker in Python or TypeScript does, line for
// line. The tests of test/remote run it against real owners
// (bin/owner --agent nats); a program may copy it.
//
// A Worker subscribes to <prefix>.agent.<deployment>.step in the
// deployment's queue group and runs Handle for each step request on a
// goroutine of its own, with a Step that streams deltas, journals calls,
// pages history sent by reference, sends heartbeats while Handle runs and
// is cancelled when the owner publishes on the step's cancel subject.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// Version is the step protocol version this worker speaks.
const Version = 1

// requestTimeout bounds one journal or history request: an owner that
// does not answer in time died or lost the step (another owner runs it
// again, with a new token), and the step is abandoned.
const requestTimeout = 20 * time.Second

// Request is a step request (schema wire/testdata/agent/step_request.v1.json).
type Request struct {
	V            int               `json:"v"`
	Token        string            `json:"token"`
	DeploymentID string            `json:"deploymentId"`
	SessionID    string            `json:"sessionId"`
	TurnID       string            `json:"turnId"`
	Step         int               `json:"step"`
	Caller       string            `json:"caller,omitempty"`
	State        json.RawMessage   `json:"state,omitempty"`
	StateRef     *Ref              `json:"stateRef,omitempty"`
	History      []json.RawMessage `json:"history,omitempty"`
	HistoryRef   *Ref              `json:"historyRef,omitempty"`
	Inputs       []Input           `json:"inputs,omitempty"`
	InputsRef    *Ref              `json:"inputsRef,omitempty"`
	HeartbeatMs  int64             `json:"heartbeatMs"`
	Deadline     time.Time         `json:"deadline"`
	Subjects     struct {
		Delta, Heartbeat, Journal, Cancel, History string
	} `json:"subjects"`
}

// Ref is a part of the request sent by reference.
type Ref struct {
	Count int `json:"count"`
	Bytes int `json:"bytes"`
}

// Input is one admitted command of the step (the members this worker
// reads).
type Input struct {
	Kind string `json:"kind"`
	Text string `json:"text,omitempty"`
}

// Reply is a step reply: the members a worker sets (schema
// wire/testdata/agent/step_reply.v1.json).
type Reply map[string]any

// Output is a reply that completes the turn with text.
func Output(text string) Reply {
	return Reply{"outcome": "done", "events": []any{map[string]any{"kind": "message.output", "data": map[string]any{"text": text}}}}
}

// Worker serves one deployment's steps.
type Worker struct {
	NC         *nats.Conn
	Prefix     string // "baton" when empty
	Deployment string
	// Handle runs one step; its reply (nil: none is sent, as if the
	// worker died) goes back to the owner with "v" set.
	Handle func(s *Step) Reply
	// ReplyVersion, when set, is the protocol version its replies claim
	// instead of Version: a test plays an older worker with it.
	ReplyVersion *int

	mu     sync.Mutex
	sub    *nats.Subscription
	cs     *nats.Subscription // every step's cancel subject
	steps  map[string]*Step   // running, by token
	wg     sync.WaitGroup
	ctx    context.Context // the steps' parent: Close cancels it
	cancel context.CancelFunc
}

func (w *Worker) subject(rest string) string {
	p := w.Prefix
	if p == "" {
		p = "baton"
	}
	return p + ".agent." + w.Deployment + "." + rest
}

// Start subscribes to the step subject in the deployment's queue group.
func (w *Worker) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ctx, w.cancel = context.WithCancel(context.Background())
	p := w.Prefix
	if p == "" {
		p = "baton"
	}
	w.steps = map[string]*Step{}
	// One subscription for every step's cancel, made before any step is
	// taken, so no cancel is missed while a step starts.
	cs, err := w.NC.Subscribe(w.subject("cancel.*"), w.cancelStep)
	if err != nil {
		return err
	}
	sub, err := w.NC.QueueSubscribe(w.subject("step"), p+"-agent-"+w.Deployment, w.serve)
	if err != nil {
		_ = cs.Unsubscribe()
		return err
	}
	w.sub, w.cs = sub, cs
	return w.NC.Flush()
}

// Stop unsubscribes (no new steps) and waits for the running ones.
func (w *Worker) Stop() {
	w.mu.Lock()
	if w.sub != nil {
		_ = w.sub.Unsubscribe()
		w.sub = nil
	}
	w.mu.Unlock()
	w.wg.Wait()
	w.mu.Lock()
	if w.cs != nil {
		_ = w.cs.Unsubscribe()
		w.cs = nil
	}
	w.mu.Unlock()
}

// cancelStep cancels the step a cancel message names.
func (w *Worker) cancelStep(m *nats.Msg) {
	var c struct{ Token string }
	if json.Unmarshal(m.Data, &c) != nil {
		return
	}
	w.mu.Lock()
	s := w.steps[c.Token]
	w.mu.Unlock()
	if s != nil {
		s.cancelled.Store(true)
		s.stop()
	}
}

// Close stops at once: no new steps, the running ones cancelled (their
// owners run them again elsewhere or fail them), and waits for them.
func (w *Worker) Close() {
	w.mu.Lock()
	if w.cancel != nil {
		w.cancel()
	}
	w.mu.Unlock()
	w.Stop()
}

func (w *Worker) serve(m *nats.Msg) {
	var req Request
	if err := json.Unmarshal(m.Data, &req); err != nil || req.V != Version {
		return // not ours to answer: the owner times out
	}
	ctx, cancel := context.WithDeadline(w.ctx, req.Deadline)
	s := &Step{Req: req, w: w, ctx: ctx, stop: cancel}
	w.mu.Lock()
	w.steps[req.Token] = s
	w.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() {
			w.mu.Lock()
			delete(w.steps, req.Token)
			w.mu.Unlock()
			cancel()
		}()
		stopBeat := s.heartbeat()
		r := w.Handle(s)
		stopBeat()
		if r == nil {
			return
		}
		r["v"] = Version
		if w.ReplyVersion != nil {
			r["v"] = *w.ReplyVersion
		}
		b, _ := json.Marshal(r)
		_ = m.Respond(b)
	}()
}

// Step is one step being served.
type Step struct {
	Req       Request
	w         *Worker
	ctx       context.Context
	stop      context.CancelFunc
	cancelled atomic.Bool
}

// Context is cancelled when the owner cancels the step or its deadline
// passes.
func (s *Step) Context() context.Context { return s.ctx }

// Cancelled reports whether the owner cancelled the step.
func (s *Step) Cancelled() bool { return s.cancelled.Load() }

// Text is the step's inputs' text, joined with newlines.
func (s *Step) Text() string {
	var t []string
	for _, in := range s.inputs() {
		if in.Text != "" {
			t = append(t, in.Text)
		}
	}
	return strings.Join(t, "\n")
}

func (s *Step) inputs() []Input {
	if s.Req.InputsRef == nil {
		return s.Req.Inputs
	}
	items, err := s.page("inputs")
	if err != nil {
		return nil
	}
	var out []Input
	for _, it := range items {
		var in Input
		if json.Unmarshal(it, &in) == nil {
			out = append(out, in)
		}
	}
	return out
}

// Delta streams text to the session's live clients.
func (s *Step) Delta(text string) {
	b, _ := json.Marshal(map[string]any{"v": Version, "text": text})
	_ = s.w.NC.Publish(s.Req.Subjects.Delta, b)
}

// heartbeat publishes a heartbeat every heartbeatMs until stopped.
func (s *Step) heartbeat() func() {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Duration(s.Req.HeartbeatMs) * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = s.w.NC.Publish(s.Req.Subjects.Heartbeat, nil)
			case <-done:
				return
			}
		}
	}()
	return func() { close(done) }
}

// History is the step's history entries: inline, or paged from the
// history subject. Paged reports how many pages it took (0: inline).
func (s *Step) History() (entries []json.RawMessage, pages int, err error) {
	if s.Req.HistoryRef == nil {
		return s.Req.History, 0, nil
	}
	items, err := s.pageCount("history", &pages)
	return items, pages, err
}

func (s *Step) page(part string) ([]json.RawMessage, error) {
	var n int
	return s.pageCount(part, &n)
}

func (s *Step) pageCount(part string, pages *int) ([]json.RawMessage, error) {
	var all []json.RawMessage
	offset := 0
	for {
		b, _ := json.Marshal(map[string]any{"v": Version, "token": s.Req.Token, "part": part, "offset": offset})
		m, err := s.request(s.Req.Subjects.History, b)
		if err != nil {
			return nil, err
		}
		var pg struct {
			Items []json.RawMessage `json:"items"`
			Next  *int              `json:"next"`
			Error *struct{ Code, Message string }
		}
		if err := json.Unmarshal(m.Data, &pg); err != nil {
			return nil, err
		}
		if pg.Error != nil {
			return nil, fmt.Errorf("%s: %s", pg.Error.Code, pg.Error.Message)
		}
		*pages++
		all = append(all, pg.Items...)
		if pg.Next == nil {
			return all, nil
		}
		offset = *pg.Next
	}
}

// request is a request to the step's owner, bounded by the step's
// context and requestTimeout.
func (s *Step) request(subject string, body []byte) (*nats.Msg, error) {
	ctx, cancel := context.WithTimeout(s.ctx, requestTimeout)
	defer cancel()
	return s.w.NC.RequestWithContext(ctx, subject, body)
}

// journalReply is a journal reply.
type journalReply struct {
	Position int             `json:"position"`
	Key      string          `json:"key"`
	Recorded bool            `json:"recorded"`
	Result   json.RawMessage `json:"result"`
	Error    string          `json:"error"`
	Failure  *struct{ Code, Message string }
}

// Do is a journaled call: a result recorded by an earlier run of the step
// comes back without calling fn; otherwise fn runs with the call's
// idempotency key and its result (or error) is recorded before Do
// returns it.
func (s *Step) Do(name string, fn func(key string) (json.RawMessage, error)) (json.RawMessage, error) {
	begin, err := s.journal(map[string]any{"v": Version, "op": "begin", "name": name})
	if err != nil {
		return nil, err
	}
	if begin.Recorded {
		if begin.Error != "" {
			return nil, errors.New(begin.Error)
		}
		return begin.Result, nil
	}
	res, ferr := fn(begin.Key)
	rec := map[string]any{"v": Version, "op": "record", "position": begin.Position}
	if ferr != nil {
		rec["error"] = ferr.Error()
	} else {
		rec["result"] = res
	}
	done, err := s.journal(rec)
	if err != nil {
		return nil, err
	}
	if done.Error != "" {
		return nil, errors.New(done.Error)
	}
	return done.Result, nil // another run's result if it recorded first
}

func (s *Step) journal(req map[string]any) (journalReply, error) {
	var r journalReply
	b, _ := json.Marshal(req)
	m, err := s.request(s.Req.Subjects.Journal, b)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return r, err
	}
	if r.Failure != nil {
		return r, fmt.Errorf("journal: %s: %s", r.Failure.Code, r.Failure.Message)
	}
	return r, nil
}
