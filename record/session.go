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
	// StateQuarantined: the session could not boot, or kept killing its
	// owner process, QuarantineAfter times in a row; no owner runs it until
	// an operator retries or ends it (docs/driver.md, "Quarantine").
	StateQuarantined State = "quarantined"
)

// Valid reports whether st is one of the six states.
func (st State) Valid() bool {
	switch st {
	case StateActive, StateHandoff, StateHibernated, StatePaused, StateEnded, StateQuarantined:
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
	// BootAttempts counts the boot attempts since the session was last
	// settled (docs/driver.md, "Quarantine"): a claim that finds the
	// named run may have died of the session (Attempt: a step in flight,
	// or a run that never reached its first commit), an attempt that
	// failed before its claim (Failed), or a run whose own commit the store
	// refused (Refused). A commit that shows progress (Commit) resets it.
	BootAttempts int `json:"bootAttempts,omitempty"`
	// LastBootError is the error of the last attempt that failed before
	// its claim, or of the run whose commit was refused; a counted claim
	// clears it (that run, if it vanished, died with its process:
	// ProcessDied).
	LastBootError string `json:"lastBootError,omitempty"`
	// BootAttemptAt is when the last attempt was counted: the origin of the
	// backoff before the next one.
	BootAttemptAt time.Time `json:"bootAttemptAt,omitzero"`
	// Quarantine is set while the state is quarantined.
	Quarantine *QuarantineInfo `json:"quarantine,omitempty"`
	// Retry names the deployment an operator's retry moves the session to
	// (adopted there by the target-driven path); nil for a retry in place.
	// The claim that takes the session clears it.
	Retry *RetryTarget `json:"retry,omitempty"`
	// Finish is an operator's pending request to end or retry the
	// quarantined session (record/finish.go); the owner that carries it
	// out clears it.
	Finish *FinishRequest `json:"finish,omitempty"`
	// Deleted is set on the tombstone a delete leaves (record/delete.go):
	// the session's content is gone, its ID stays taken.
	Deleted *Deletion `json:"deleted,omitempty"`
	// EventSeqFloor is the seq of the last event appended outside a commit
	// (session.quarantined, session.retried, session.ended by an
	// operator): every later boot continues from the larger of it and the
	// checkpoint's event seq. FloorEvent is that event, wire-encoded, kept
	// until a commit lands so that whoever finds it missing from the
	// stream appends it (its message ID deduplicates).
	EventSeqFloor uint64          `json:"eventSeqFloor,omitempty"`
	FloorEvent    json.RawMessage `json:"floorEvent,omitempty"`
	// Checkpoint is opaque to kv: the runtime's wire-encoded checkpoint
	// (applied commands, outbox, timer, agent state).
	Checkpoint json.RawMessage `json:"checkpoint,omitempty"`
	// Extra holds the members a later build wrote that this one does not
	// know; every write of the record writes them back unchanged (builds
	// before it dropped them: docs/wire.md, "The session record"). A
	// transition copies the record and so keeps them.
	Extra Members `json:"-"`
}

// sessionRecord is SessionRecord without its JSON methods.
type sessionRecord SessionRecord

// MarshalJSON encodes the record with the members it kept (Extra).
//
// A checkpoint that is an object's bytes, {…}, is written verbatim, not
// re-scanned: it is the runtime's wire-encoded checkpoint, which
// wire.EncodeCheckpoint validated and compacted (or one a decode of the
// record already parsed), and encoding/json's pass over a raw value
// (validate, compact, escape) cost every commit tens of microseconds for a
// few kilobytes. Any other value — one a test or a fault left, which a
// quarantine writes back unchanged — goes through encoding/json as before,
// which refuses one that is not JSON.
func (r SessionRecord) MarshalJSON() ([]byte, error) {
	cp := r.Checkpoint
	if len(cp) < 2 || cp[0] != '{' || cp[len(cp)-1] != '}' {
		return encodeKeeping(sessionRecord(r), r.Extra)
	}
	r.Checkpoint = nil // spliced in after the other members, where encoding/json put it
	return encodeKeeping(sessionRecord(r), r.Extra, member{"checkpoint", cp})
}

// UnmarshalJSON decodes the record and keeps the members this build does
// not know in Extra.
func (r *SessionRecord) UnmarshalJSON(data []byte) error {
	rest, cp, ok := splitCheckpoint(data)
	if !ok {
		return decodeInto(data, (*sessionRecord)(r), &r.Extra)
	}
	if err := decodeInto(rest, (*sessionRecord)(r), &r.Extra); err != nil {
		return err
	}
	r.Checkpoint = cp
	return nil
}

// EncodeSession is json.Marshal of the record without encoding/json's
// second pass over a method's output: the store's encoding on every CAS.
func EncodeSession(r SessionRecord) ([]byte, error) { return r.MarshalJSON() }

// DecodeSession is json.Unmarshal of a record without encoding/json's
// validating pass before a method: the store's decoding of every read.
func DecodeSession(data []byte) (SessionRecord, error) {
	var r SessionRecord
	err := r.UnmarshalJSON(data)
	return r, err
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
	// Extra: the members this build does not know (SessionRecord.Extra).
	Extra Members `json:"-"`
}

type handoffOutcome HandoffOutcome

// MarshalJSON encodes the outcome with the members it kept.
func (h HandoffOutcome) MarshalJSON() ([]byte, error) {
	return encodeKeeping(handoffOutcome(h), h.Extra)
}

// UnmarshalJSON decodes the outcome and keeps unknown members in Extra.
func (h *HandoffOutcome) UnmarshalJSON(data []byte) error {
	return decodeInto(data, (*handoffOutcome)(h), &h.Extra)
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
		return invalid("session record %s: state %q is not one of active, handoff, hibernated, paused, ended, quarantined", r.SessionID, r.State)
	}
	return nil
}
