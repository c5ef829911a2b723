package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
)

// payloadHeadroom is kept free under the server's max_payload for the
// message's subject, reply and framing.
const payloadHeadroom = 8 << 10

// maxPageBytes bounds one history page's items.
const maxPageBytes = 512 << 10

// part is one part of a request sent by reference: its items, encoded.
type part struct {
	items []json.RawMessage
	bytes int
}

func newPart(items []json.RawMessage) *part {
	p := &part{items: items}
	for _, it := range items {
		p.bytes += len(it)
	}
	return p
}

func (p *part) ref() *wire.AgentPartRef {
	return &wire.AgentPartRef{Count: len(p.items), Bytes: p.bytes}
}

// newStep builds the step's request: the history inline when it is
// within InlineBytes, then whatever must go by reference (history, inputs,
// state, in that order) for the request to fit max_payload.
func (a *Agent) newStep(ctx context.Context, in runtime.StepInput, token string) (*step, error) {
	req := a.request(ctx, in, token)
	parts, err := requestParts(req)
	if err != nil {
		return nil, err
	}
	sctx, stop := context.WithCancel(ctx)
	s := &step{a: a, in: in, token: token, ctx: sctx, stop: stop, stream: in.Stream(ctx),
		parts: map[string]*part{}, reply: make(chan *nats.Msg, 4)}
	if h := parts[wire.AgentPartHistory]; h != nil && h.bytes > a.cfg.InlineBytes {
		s.byReference(&req, wire.AgentPartHistory, h)
	}
	limit := int(a.cfg.NC.MaxPayload()) - payloadHeadroom
	for _, name := range []string{wire.AgentPartHistory, wire.AgentPartInputs, wire.AgentPartState, ""} {
		b, err := wire.EncodeAgent(req)
		if err != nil {
			stop()
			return nil, fmt.Errorf("remote: encode the step request: %w", err)
		}
		if len(b) <= limit {
			s.req = b
			return s, nil
		}
		if p := parts[name]; p != nil && s.parts[name] == nil {
			s.byReference(&req, name, p)
		}
	}
	stop()
	return nil, fmt.Errorf("the step request does not fit the server's max_payload (%d bytes) even with its history, inputs and state sent by reference", limit)
}

// requestParts are the parts of req that may go by reference, encoded
// item by item (absent when req has none).
func requestParts(req wire.AgentStepRequest) (map[string]*part, error) {
	hist, err := encodeItems(req.History)
	if err != nil {
		return nil, err
	}
	inputs, err := encodeItems(req.Inputs)
	if err != nil {
		return nil, err
	}
	parts := map[string]*part{}
	if len(hist) > 0 {
		parts[wire.AgentPartHistory] = newPart(hist)
	}
	if len(inputs) > 0 {
		parts[wire.AgentPartInputs] = newPart(inputs)
	}
	if req.State != nil {
		parts[wire.AgentPartState] = newPart([]json.RawMessage{req.State})
	}
	return parts, nil
}

// byReference takes part name out of req: the worker pages it.
func (s *step) byReference(req *wire.AgentStepRequest, name string, p *part) {
	s.parts[name] = p
	switch name {
	case wire.AgentPartHistory:
		req.History, req.HistoryRef = nil, p.ref()
	case wire.AgentPartInputs:
		req.Inputs, req.InputsRef = nil, p.ref()
	case wire.AgentPartState:
		req.State, req.StateRef = nil, p.ref()
	}
}

// request is the step request with every part inline.
func (a *Agent) request(ctx context.Context, in runtime.StepInput, token string) wire.AgentStepRequest {
	n, dep := a.cfg.Names, a.cfg.Deployment
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(100 * 365 * 24 * time.Hour)
	}
	req := wire.AgentStepRequest{
		V: wire.AgentProtocolVersion, Token: token, DeploymentID: dep,
		SessionID: in.SessionID, TurnID: in.TurnID, Step: in.Step, Caller: in.Caller,
		// Protocol version 1 carries no subagent references: a remote agent
		// sees a child's result as its kind only (docs/agent.md).
		State: in.State, Inputs: wire.AgentInputs(in.Inputs),
		HeartbeatMs: a.cfg.HeartbeatInterval.Milliseconds(), Deadline: deadline.UTC(),
		Subjects: wire.AgentStepSubjects{
			Delta: n.AgentDelta(dep, token), Heartbeat: n.AgentHeartbeat(dep, token),
			Journal: n.AgentJournal(dep, token), Cancel: n.AgentCancel(dep, token), History: n.AgentHistory(dep),
		},
	}
	for _, e := range in.History {
		req.History = append(req.History, e.Wire())
	}
	return req
}

func encodeItems[T any](items []T) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(items))
	for _, it := range items {
		b, err := wire.EncodeAgent(it)
		if err != nil {
			return nil, fmt.Errorf("remote: encode the step request: %w", err)
		}
		out = append(out, b)
	}
	return out, nil
}

// servePage answers a history request for a step this process runs; a
// token it does not know is another owner process's (every owner of the
// deployment subscribes), and gets no answer from this one.
func (a *Agent) servePage(m *nats.Msg) {
	var r wire.AgentHistoryRequest
	if err := wire.DecodeAgent("history_request", m.Data, &r); err != nil {
		a.respond(m, wire.AgentHistoryPage{V: wire.AgentProtocolVersion, Error: &wire.AgentError{Code: "invalid_request", Message: err.Error()}})
		return
	}
	s := a.running(r.Token)
	if s == nil {
		return
	}
	s.touch()
	a.respond(m, s.page(r))
}

// page is one page of part r.Part from r.Offset: at least one item, then
// as many as fit maxPageBytes and the server's max_payload.
func (s *step) page(r wire.AgentHistoryRequest) wire.AgentHistoryPage {
	name := r.Part
	if name == "" {
		name = wire.AgentPartHistory
	}
	pg := wire.AgentHistoryPage{V: wire.AgentProtocolVersion, Part: name, Offset: r.Offset}
	p := s.parts[name]
	if p == nil {
		pg.Error = &wire.AgentError{Code: "not_by_reference", Message: fmt.Sprintf("the step request has its %s inline", name)}
		return pg
	}
	pg.Total = len(p.items)
	if r.Offset > len(p.items) {
		pg.Error = &wire.AgentError{Code: "invalid_offset", Message: fmt.Sprintf("offset %d is past the %d items", r.Offset, len(p.items))}
		return pg
	}
	limit := int(s.a.cfg.NC.MaxPayload()) - payloadHeadroom
	if r.Offset < len(p.items) && len(p.items[r.Offset]) > limit {
		pg.Error = &wire.AgentError{Code: "item_too_large", Message: fmt.Sprintf("item %d is %d bytes, over the server's max_payload", r.Offset, len(p.items[r.Offset]))}
		return pg
	}
	budget := min(maxPageBytes, limit)
	i, used := r.Offset, 0
	for i < len(p.items) && (i == r.Offset || used+len(p.items[i]) <= budget) {
		used += len(p.items[i])
		i++
	}
	pg.Items = p.items[r.Offset:i]
	if i < len(p.items) {
		pg.Next = &i
	}
	return pg
}

// respond answers request m with v; a failure is logged (the worker's
// request times out).
func (a *Agent) respond(m *nats.Msg, v any) {
	b, err := wire.EncodeAgent(v)
	if err == nil {
		err = m.Respond(b)
	}
	if err != nil {
		a.log.Warn("step protocol reply not sent", "subject", m.Subject, "error", err)
	}
}
