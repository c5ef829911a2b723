package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
)

// Journal codes a worker may get back (AgentJournalReply.Failure), besides
// runtime's nondeterministic_step and journal_unavailable.
const (
	codeInvalidRequest = "invalid_request" // not a valid journal request
	codeJournalBusy    = "journal_busy"    // a call is begun and not recorded
	codeNoCall         = "journal_no_call" // record for a position not begun
	codeStepOver       = "step_over"       // the step ended (cancelled, timed out)
)

// call is one journaled call of the worker's: begun, waiting for its
// record.
type call struct {
	pos    int
	name   string
	record chan recordMsg
}

type recordMsg struct {
	msg *nats.Msg
	req wire.AgentJournalRequest
}

// journal handles one journal request of the step's worker.
func (s *step) journal(m *nats.Msg) {
	var r wire.AgentJournalRequest
	if err := wire.DecodeAgent("journal_request", m.Data, &r); err != nil {
		s.a.respond(m, failure(0, codeInvalidRequest, err))
		return
	}
	switch r.Op {
	case wire.AgentJournalBegin:
		s.begin(m, r)
	case wire.AgentJournalRecord:
		s.recordCall(m, r)
	}
}

// begin takes the step's next call position for r.Name and runs it
// through the step's runtime.Journal on a goroutine of its own: Do
// returns a recorded result without calling fn, or calls fn, which tells
// the worker to make the call and waits for its record.
func (s *step) begin(m *nats.Msg, r wire.AgentJournalRequest) {
	if r.Name == "" {
		s.a.respond(m, failure(0, codeInvalidRequest, errors.New("begin needs a name")))
		return
	}
	s.jmu.Lock()
	if s.open != nil {
		pos := s.open.pos
		s.jmu.Unlock()
		s.a.respond(m, failure(0, codeJournalBusy, fmt.Errorf("call %d is begun and not recorded: calls are sequential", pos)))
		return
	}
	s.n++
	c := &call{pos: s.n, name: r.Name, record: make(chan recordMsg, 1)}
	s.open = c
	s.jmu.Unlock()
	go s.runCall(m, c)
}

// runCall is one call's journal.Do; it answers the begin (recorded
// result, or the key to call with) and then the record.
func (s *step) runCall(begin *nats.Msg, c *call) {
	var rec *recordMsg
	var fnErr error
	res, err := s.in.Do(s.ctx, c.name, func(ctx context.Context, key string) ([]byte, error) {
		s.a.respond(begin, wire.AgentJournalReply{V: wire.AgentProtocolVersion, Position: c.pos, Key: key})
		select {
		case r := <-c.record:
			rec = &r
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if rec.req.Error != "" {
			fnErr = errors.New(rec.req.Error)
			return nil, fnErr
		}
		return rec.req.Result, nil
	})
	s.jmu.Lock()
	s.open = nil
	s.jmu.Unlock()
	key := runtime.EffectKey(s.in.SessionID, s.in.TurnID, s.in.Step, c.pos, c.name)
	to := begin
	if rec != nil {
		to = rec.msg
	} else if s.ctx.Err() != nil && err != nil {
		return // cancelled before the worker recorded: it was told
	}
	s.a.respond(to, outcome(c.pos, key, res, err, fnErr))
}

// recordCall hands the worker's record to the call it begun.
func (s *step) recordCall(m *nats.Msg, r wire.AgentJournalRequest) {
	s.jmu.Lock()
	c := s.open
	s.jmu.Unlock()
	if c == nil || c.pos != r.Position {
		s.a.respond(m, failure(r.Position, codeNoCall, fmt.Errorf("no begun call at position %d", r.Position)))
		return
	}
	select {
	case c.record <- recordMsg{msg: m, req: r}:
	default:
		s.a.respond(m, failure(r.Position, codeJournalBusy, fmt.Errorf("call %d is being recorded", r.Position)))
	}
}

// outcome is the reply of a call's Do: its result or recorded error, or
// the failure that fails the step.
func outcome(pos int, key string, res []byte, err, fnErr error) wire.AgentJournalReply {
	rep := wire.AgentJournalReply{V: wire.AgentProtocolVersion, Position: pos, Key: key, Recorded: true}
	var ee *runtime.EffectError
	var nd *runtime.NondeterministicError
	switch {
	case err == nil:
		rep.Result = asJSON(res)
	case fnErr != nil && errors.Is(err, fnErr):
		rep.Error = fnErr.Error()
	case errors.As(err, &ee):
		rep.Error = ee.Message
	case errors.As(err, &nd):
		return failure(pos, runtime.CodeNondeterministic, err)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return failure(pos, codeStepOver, err)
	default:
		return failure(pos, runtime.CodeJournalUnavailable, err)
	}
	return rep
}

// asJSON is a recorded result as a JSON value: a worker's results are JSON;
// bytes that are not (recorded by a Go agent of another build) are sent as
// a JSON string.
func asJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	if json.Valid(b) {
		return b
	}
	s, _ := json.Marshal(string(b))
	return s
}

func failure(pos int, code string, err error) wire.AgentJournalReply {
	return wire.AgentJournalReply{V: wire.AgentProtocolVersion, Position: pos, Failure: &wire.AgentError{Code: code, Message: err.Error()}}
}
