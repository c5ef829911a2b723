package record

import (
	"encoding/json"
	"time"

	"github.com/baton-rt/baton/subjects"
)

// State is a session's lifecycle state as recorded in its session record.
type State string

// The session states (docs/api.md: the `state` of GET /v1/sessions/{id}).
const (
	StateActive     State = "active"
	StateHandoff    State = "handoff"
	StateHibernated State = "hibernated"
	StatePaused     State = "paused"
	StateEnded      State = "ended"
)

// Valid reports whether st is one of the five states.
func (st State) Valid() bool {
	switch st {
	case StateActive, StateHandoff, StateHibernated, StatePaused, StateEnded:
		return true
	}
	return false
}

// SessionRecord is the value of baton_sessions/<sessionID>: ownership, the
// settled checkpoint and the last handoff outcome. Every write of it is a
// revision CAS; the revision is the ownership fence.
type SessionRecord struct {
	SessionID    string `json:"sessionId"`
	OwnerRunID   string `json:"ownerRunId"`
	DeploymentID string `json:"deploymentId"`
	Epoch        uint64 `json:"epoch"`
	OwnerProcess string `json:"ownerProcess"`
	State        State  `json:"state"`
	Consumer     string `json:"consumer"`    // current inbox consumer name
	WireV        int    `json:"wireVersion"` // inbox wire version the current owner accepts
	// Writer and WriteCounter identify the write that produced this value
	// (run ID + counter), so an uncertain write can be settled (Settle).
	Writer       string          `json:"writer"`
	WriteCounter uint64          `json:"writeCounter"`
	Handoff      *HandoffOutcome `json:"handoff,omitempty"` // last handoff
	UpdatedAt    time.Time       `json:"updatedAt"`
	// Checkpoint is opaque to kv: the runtime's wire-encoded checkpoint
	// (applied commands, outbox, timer, agent state).
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
}

// HandoffOutcome records the last handoff of a session, so replaying a
// handoff ID returns the same result (docs/handoff.md).
type HandoffOutcome struct {
	ID      string `json:"id"`
	Target  string `json:"target"`  // target deployment
	Outcome string `json:"outcome"` // "completed" | "failed" | "abandoned" | ...
	Step    string `json:"step,omitempty"`
	// From and the trigger are recorded by the activation, so an owner
	// that recovers a successor whose first commit never landed can still
	// record handoff.started/completed (docs/handoff.md).
	From             string `json:"from,omitempty"`
	TriggerSeq       uint64 `json:"triggerSeq,omitempty"`
	TriggerCommandID string `json:"triggerCommandId,omitempty"`
}

// Session is a session record with the revision it was read at.
type Session struct {
	Record   SessionRecord
	Revision uint64
}

// Validate checks what kv requires of a record before writing it.
func (r SessionRecord) Validate() error {
	if err := subjects.ValidateSessionID(r.SessionID); err != nil {
		return invalid("session record: %w", err)
	}
	if err := subjects.ValidateDeployment(r.DeploymentID); err != nil {
		return invalid("session record %s: %w", r.SessionID, err)
	}
	if !r.State.Valid() {
		return invalid("session record %s: state %q is not one of active, handoff, hibernated, paused, ended", r.SessionID, r.State)
	}
	return nil
}
