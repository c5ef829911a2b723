package runtime

import (
	"encoding/json"

	"github.com/baton-rt/baton/wire"
)

// Event is one session event. The machine assigns Seq (contiguous per
// session, starting at 1) when it stages the event for a commit; an agent
// leaves it zero. Data is the event's JSON body.
type Event struct {
	Seq  uint64 `json:"seq,omitempty"`
	Kind string `json:"kind"`
	// V is the data version of a built-in kind's event the machine records
	// above version 1 (0 means 1); an agent leaves it zero.
	V    int             `json:"v,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Event kinds the machine emits (the wire package owns the vocabulary). An agent may emit EventMessageOutput and
// the kinds it registers; every other built-in kind is reserved.
const (
	EventSessionStarted    = wire.EventSessionStarted
	EventCommandApplied    = wire.EventCommandApplied
	EventCommandRejected   = wire.EventCommandRejected
	EventTurnStarted       = wire.EventTurnStarted
	EventTurnStep          = wire.EventTurnStep
	EventTurnStepRetried   = wire.EventTurnStepRetried
	EventMessageOutput     = wire.EventMessageOutput
	EventInputRequested    = wire.EventInputRequested
	EventAuthRequested     = wire.EventAuthRequested
	EventTaskStarted       = wire.EventTaskStarted
	EventTaskCompleted     = wire.EventTaskCompleted
	EventTurnCompleted     = wire.EventTurnCompleted
	EventTurnCancelled     = wire.EventTurnCancelled
	EventSessionWaiting    = wire.EventSessionWaiting
	EventSessionPaused     = wire.EventSessionPaused
	EventSessionResumed    = wire.EventSessionResumed
	EventSessionTagged     = wire.EventSessionTagged
	EventHandoffStarted    = wire.EventHandoffStarted
	EventHandoffSkipped    = wire.EventHandoffSkipped
	EventHandoffCompleted  = wire.EventHandoffCompleted
	EventHandoffFailed     = wire.EventHandoffFailed
	EventWaitCancelled     = wire.EventWaitCancelled
	EventStepInterrupted   = wire.EventStepInterrupted
	EventLimitReached      = wire.EventLimitReached
	EventWireRejected      = wire.EventWireRejected
	EventSessionEnded      = wire.EventSessionEnded
	EventError             = wire.EventErrorKind
	EventChildStarted      = wire.EventChildStarted
	EventChildCompleted    = wire.EventChildCompleted
	EventChildWaiting      = wire.EventChildWaiting
	EventChildClosed       = wire.EventChildClosed
	EventCommandSuperseded = wire.EventCommandSuperseded
	EventTurnRolledBack    = wire.EventTurnRolledBack
)

// BuiltinEvents lists the built-in kinds of the machine's turns, waits,
// handoffs and children. [Reserved] refuses these and every other built-in
// kind (session.tagged, the quarantine's).
func BuiltinEvents() []string {
	return []string{
		EventSessionStarted, EventCommandApplied, EventCommandRejected, EventTurnStarted,
		EventTurnStep, EventTurnStepRetried, EventMessageOutput, EventInputRequested,
		EventAuthRequested, EventTaskStarted, EventTaskCompleted,
		EventTurnCompleted, EventTurnCancelled, EventSessionWaiting,
		EventSessionPaused, EventSessionResumed, EventHandoffStarted,
		EventHandoffSkipped, EventHandoffCompleted, EventHandoffFailed,
		EventWaitCancelled, EventStepInterrupted, EventWireRejected,
		EventSessionEnded, EventError, EventLimitReached,
		EventChildStarted, EventChildCompleted, EventChildWaiting, EventChildClosed,
		EventCommandSuperseded, EventTurnRolledBack,
	}
}

// Reserved reports whether an agent may not emit kind as its own durable
// event: a built-in kind — every kind [wire.IsBuiltinEvent] names: the
// machine's ([BuiltinEvents]) and those recorded outside any owner's
// commit (session.quarantined, session.retried) — or a live kind
// (message.delta and message.discarded exist only live; see [Stream]).
func Reserved(kind string) bool {
	return wire.IsBuiltinEvent(kind) || kind == wire.EventMessageDelta || kind == wire.EventMessageDiscarded
}

// Handoff skip reasons (handoff.skipped {reason}).
const (
	SkipBusy          = wire.SkipBusy
	SkipQueued        = wire.SkipQueued
	SkipInput         = wire.SkipInput
	SkipAuthorization = wire.SkipAuthorization
	SkipTask          = wire.SkipTask
	SkipPaused        = wire.SkipPaused
	SkipChild         = wire.SkipChild
)

// Reasons an owner refuses a command (command.rejected {reason}; the
// driver sets Command.Refused).
const (
	// RejectAgentMismatch: a handoff trigger (a delivery or a move)
	// stamped by a deployment of another agent.
	RejectAgentMismatch = wire.RejectAgentMismatch
)

// End reasons (session.ended {reason}).
const (
	EndDone    = "done"
	EndExpired = "expired"
	EndFailed  = "failed"
	EndClosed  = wire.EndClosed // a parent closed this child's handle
	// EndTerminated: the session's user ended it (a terminate command,
	// session.ended {by: "user"}), or an operator or user ended it while
	// it was quarantined ([Terminate]; the finisher's event names who).
	EndTerminated = wire.EndTerminated
	// EndIdleExpired: the session had no command for its owner's idle
	// limit ([IdleExpire]).
	EndIdleExpired = wire.EndIdleExpired
)

// Fields is a convenience body for an agent's own event kinds: keys marshal
// sorted, so bodies are deterministic. (The machine builds the built-in
// kinds' bodies from wire's types, body.go.)
type Fields map[string]any

// NewEvent builds an event from a kind and a JSON-marshalable body.
func NewEvent(kind string, data any) Event {
	if data == nil {
		return Event{Kind: kind}
	}
	b, err := json.Marshal(data)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"unmarshalable": err.Error()})
	}
	return Event{Kind: kind, Data: b}
}

// Output builds a message.output event {"text": text}.
func Output(text string) Event { return builtin(wire.MessageOutput{Text: text}) }
