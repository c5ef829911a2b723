package remote

import (
	"fmt"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
)

// result is the step result of the worker's reply: a reply that is not a
// valid AgentStepReply of the protocol's version fails the step with
// result_invalid (the driver's checker then holds a valid one to the same
// rules as any agent's result).
func (s *step) result(m *nats.Msg) runtime.StepResult {
	var r wire.AgentStepReply
	if err := wire.DecodeAgent("step_reply", m.Data, &r); err != nil {
		s.a.log.Warn("the worker's reply is not valid; the step fails", "session", s.in.SessionID, "step", s.in.Key(), "error", err)
		return runtime.Failed(runtime.CodeResultInvalid, fmt.Errorf("worker reply: %w", err))
	}
	return stepResult(r)
}

func stepResult(r wire.AgentStepReply) runtime.StepResult {
	out := runtime.StepResult{
		Outcome: runtime.Outcome(r.Outcome), State: r.State, Aliases: r.Aliases,
		Question: r.Question, RequestID: r.RequestID, AttemptID: r.AttemptID,
		Error: r.Error, Fatal: r.Fatal,
	}
	for _, e := range r.Events {
		out.Events = append(out.Events, runtime.Event{Kind: e.Kind, Data: e.Data})
	}
	for _, h := range r.History {
		out.History = append(out.History, runtime.EntryOf(h))
	}
	if r.Usage != nil {
		out.Usage = *r.Usage
	}
	if t := r.Task; t != nil {
		out.Task = &runtime.TaskSpec{ID: t.ID, Kind: t.Kind, Duration: time.Duration(t.DurationMs) * time.Millisecond, Input: t.Input}
	}
	return out
}
