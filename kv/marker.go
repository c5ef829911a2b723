package kv

import (
	"context"
	"encoding/json"
	"time"

	"github.com/baton-rt/baton/subjects"
)

// Marker is the value of baton_hooks/handoff.<sessionID>: a handoff in
// progress (DESIGN.md §6, step 1). At most one per session (create-only);
// removed once the transfer activated or was recovered.
type Marker struct {
	HandoffID  string `json:"handoffId"`
	SessionID  string `json:"sessionId"`
	SourceRun  string `json:"sourceRun"`  // owner run that staged the handoff
	Target     string `json:"target"`     // target deployment
	TriggerSeq uint64 `json:"triggerSeq"` // inbox sequence of the triggering delivery
	// TriggerCommandID is the trigger's command ID (handoff.started); empty
	// in markers written before it was recorded.
	TriggerCommandID string    `json:"triggerCommandId,omitempty"`
	StagedRevision   uint64    `json:"stagedRevision"` // session-record revision after staging
	CreatedAt        time.Time `json:"createdAt"`
	Outcome          string    `json:"outcome,omitempty"`
}

func (m Marker) validate() error {
	if err := subjects.ValidateSessionID(m.SessionID); err != nil {
		return invalid("handoff marker: %w", err)
	}
	if m.HandoffID == "" {
		return invalid("handoff marker %s: empty handoff ID", m.SessionID)
	}
	if err := subjects.ValidateDeployment(m.Target); err != nil {
		return invalid("handoff marker %s: target: %w", m.SessionID, err)
	}
	return nil
}

func (s *Store) encodeMarker(m Marker) (string, []byte, error) {
	if err := m.validate(); err != nil {
		return "", nil, err
	}
	if m.CreatedAt.IsZero() {
		m.CreatedAt = s.now()
	}
	key := subjects.MarkerKey(m.SessionID)
	data, err := s.hooks.encode(key, m)
	return key, data, err
}

// CreateMarker writes a session's handoff marker, create-only. An existing
// marker is an *OwnedError whose Owner is that marker's handoff ID.
func (s *Store) CreateMarker(ctx context.Context, m Marker) (uint64, error) {
	key, data, err := s.encodeMarker(m)
	if err != nil {
		return 0, err
	}
	return s.claim(ctx, s.hooks, key, s.hooks.kvWrite(key, data), markerHolder)
}

func markerHolder(e entry) *OwnedError {
	var m Marker
	if json.Unmarshal(e.data, &m) != nil {
		return nil
	}
	return &OwnedError{SessionID: m.SessionID, Owner: m.HandoffID}
}

// GetMarker reads a session's marker from the stream leader (handoff
// recovery decides on it). No marker is ErrNotFound.
func (s *Store) GetMarker(ctx context.Context, sessionID string) (Marker, uint64, error) {
	if err := subjects.ValidateSessionID(sessionID); err != nil {
		return Marker{}, 0, invalid("%w", err)
	}
	e, err := s.leaderLastRetry(ctx, s.hooks, subjects.MarkerKey(sessionID))
	if err != nil {
		return Marker{}, 0, err
	}
	var m Marker
	if err := decode(e, &m); err != nil {
		return Marker{}, 0, err
	}
	return m, e.rev, nil
}

// UpdateMarker replaces the marker at rev (e.g. to record its outcome).
func (s *Store) UpdateMarker(ctx context.Context, m Marker, rev uint64) (uint64, error) {
	key, data, err := s.encodeMarker(m)
	if err != nil {
		return 0, err
	}
	return s.hooks.update(ctx, key, data, rev)
}

// DeleteMarker deletes the marker at rev; a stale rev is ErrConflict.
func (s *Store) DeleteMarker(ctx context.Context, sessionID string, rev uint64) error {
	if err := subjects.ValidateSessionID(sessionID); err != nil {
		return invalid("%w", err)
	}
	return s.hooks.remove(ctx, subjects.MarkerKey(sessionID), rev)
}
