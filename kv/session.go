package kv

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/baton-rt/baton/subjects"
)

// State is a session's lifecycle state as recorded in its session record.
type State string

// The session states (DESIGN.md §7: the `state` of GET /v1/sessions/{id}).
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
// handoff ID returns the same result (DESIGN.md §6).
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

func (s *Store) encodeSession(rec SessionRecord) (string, []byte, error) {
	if err := rec.Validate(); err != nil {
		return "", nil, err
	}
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = s.now()
	}
	key := subjects.SessionKey(rec.SessionID)
	data, err := s.sessions.encode(key, rec)
	return key, data, err
}

// CreateSession writes a new session record, create-only (over a deleted
// record too). A loser gets an *OwnedError naming the holder's owner run.
func (s *Store) CreateSession(ctx context.Context, rec SessionRecord) (uint64, error) {
	key, data, err := s.encodeSession(rec)
	if err != nil {
		return 0, err
	}
	return s.claim(ctx, s.sessions, key, s.sessions.kvWrite(key, data), sessionHolder)
}

func sessionHolder(e entry) *OwnedError {
	var r SessionRecord
	if json.Unmarshal(e.data, &r) != nil {
		return nil
	}
	return &OwnedError{SessionID: r.SessionID, Owner: r.OwnerRunID, Ended: r.State == StateEnded}
}

// UpdateSession replaces the record if it is still at rev (the fence). A
// stale rev is ErrConflict and writes nothing.
func (s *Store) UpdateSession(ctx context.Context, rec SessionRecord, rev uint64) (uint64, error) {
	key, data, err := s.encodeSession(rec)
	if err != nil {
		return 0, err
	}
	return s.sessions.update(ctx, key, data, rev)
}

// DeleteSession deletes the record if it is still at rev; a stale rev is
// ErrConflict and deletes nothing.
func (s *Store) DeleteSession(ctx context.Context, id string, rev uint64) error {
	if err := subjects.ValidateSessionID(id); err != nil {
		return invalid("%w", err)
	}
	return s.sessions.remove(ctx, subjects.SessionKey(id), rev)
}

// ListSessions returns the IDs of every live session record (deleted ones
// excluded), sorted. It lists keys only; read a record with GetSession (a
// hint) or LeaderSession. It costs one pass over the bucket's keys, so it is
// for periodic sweeps, not for a hot path.
func (s *Store) ListSessions(ctx context.Context) ([]string, error) {
	l, err := s.sessions.kv.ListKeys(ctx)
	if err != nil {
		return nil, mapErr("list", s.sessions.name, err)
	}
	var ids []string
	for key := range l.Keys() {
		if subjects.ValidateSessionID(key) == nil {
			ids = append(ids, key)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
}

// GetSession reads the record by direct get. On a cluster any replica may
// answer, so it can be stale: a hint, never a basis for ownership.
func (s *Store) GetSession(ctx context.Context, id string) (Session, error) {
	if err := subjects.ValidateSessionID(id); err != nil {
		return Session{}, invalid("%w", err)
	}
	e, err := s.sessions.get(ctx, subjects.SessionKey(id))
	if err != nil {
		return Session{}, err
	}
	return decodeSession(e)
}

// LeaderSession reads the newest record from the stream leader.
func (s *Store) LeaderSession(ctx context.Context, id string) (Session, error) {
	if err := subjects.ValidateSessionID(id); err != nil {
		return Session{}, invalid("%w", err)
	}
	e, err := s.leaderLastRetry(ctx, s.sessions, subjects.SessionKey(id))
	if err != nil {
		return Session{}, err
	}
	return decodeSession(e)
}

// SessionAt returns the record at exactly rev (a handoff candidate loads the
// revision it was told about). It reads the leader, retrying briefly until
// the leader has rev; a newer revision is ErrConflict, a revision that never
// appears is ErrNotFound.
func (s *Store) SessionAt(ctx context.Context, id string, rev uint64) (Session, error) {
	if err := subjects.ValidateSessionID(id); err != nil {
		return Session{}, invalid("%w", err)
	}
	e, err := s.leaderAt(ctx, s.sessions, subjects.SessionKey(id), rev)
	if err != nil {
		return Session{}, err
	}
	return decodeSession(e)
}

// Settle resolves an uncertain write (DESIGN.md §5) by a leader read: true
// if the current record carries the write (writer, counter), so the write
// landed and is still the newest; false otherwise — the writer is fenced.
// A missing or deleted record is false with a zero Session and no error.
func (s *Store) Settle(ctx context.Context, id, writer string, counter uint64) (Session, bool, error) {
	cur, err := s.LeaderSession(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Session{}, false, nil
	}
	if err != nil {
		return Session{}, false, err
	}
	landed := writer != "" && cur.Record.Writer == writer && cur.Record.WriteCounter == counter
	return cur, landed, nil
}

func decodeSession(e entry) (Session, error) {
	var r SessionRecord
	if err := decode(e, &r); err != nil {
		return Session{}, err
	}
	return Session{Record: r, Revision: e.rev}, nil
}
