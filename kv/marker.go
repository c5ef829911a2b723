package kv

import (
	"context"
	"encoding/json"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

func (s *Store) encodeMarker(m record.Marker) (string, []byte, error) {
	if err := m.Validate(); err != nil {
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
// marker is an *record.OwnedError whose Owner is that marker's handoff ID.
func (s *Store) CreateMarker(ctx context.Context, m record.Marker) (uint64, error) {
	key, data, err := s.encodeMarker(m)
	if err != nil {
		return 0, err
	}
	return s.claimFrom(ctx, s.hooks, key, s.markers.take(m.SessionID), s.hooks.kvWrite(key, data), markerHolder)
}

func markerHolder(e entry) *record.OwnedError {
	var m record.Marker
	if json.Unmarshal(e.data, &m) != nil {
		return nil
	}
	return &record.OwnedError{SessionID: m.SessionID, Owner: m.HandoffID}
}

// GetMarker reads a session's marker from the stream leader (handoff
// recovery decides on it). No marker is record.ErrNotFound.
func (s *Store) GetMarker(ctx context.Context, sessionID string) (record.Marker, uint64, error) {
	if err := subjects.ValidateSessionID(sessionID); err != nil {
		return record.Marker{}, 0, invalid("%w", err)
	}
	return decodeMarker(s.leaderLast(ctx, s.hooks, subjects.MarkerKey(sessionID)))
}

// decodeMarker decodes a read marker and its revision.
func decodeMarker(e entry, err error) (record.Marker, uint64, error) {
	if err != nil {
		return record.Marker{}, 0, err
	}
	var m record.Marker
	if err := decode(e, &m); err != nil {
		return record.Marker{}, 0, err
	}
	return m, e.rev, nil
}

// MarkerHint reads a session's marker by direct get, outside the
// server's queue of JetStream API requests. On a cluster any replica may
// answer, so it can be older than the leader's marker (absent, or an
// earlier handoff's) or already removed there: a hint. A handoff candidate
// takes a hint that names its handoff and staged revision (a marker is
// removed only once its record has left that revision, which the
// candidate's claim CAS then finds) and reads the leader (GetMarker) for
// any other answer. No marker is record.ErrNotFound.
func (s *Store) MarkerHint(ctx context.Context, sessionID string) (record.Marker, uint64, error) {
	if err := subjects.ValidateSessionID(sessionID); err != nil {
		return record.Marker{}, 0, invalid("%w", err)
	}
	return decodeMarker(s.hooks.get(ctx, subjects.MarkerKey(sessionID)))
}

// UpdateMarker replaces the marker at rev (e.g. to record its outcome).
func (s *Store) UpdateMarker(ctx context.Context, m record.Marker, rev uint64) (uint64, error) {
	key, data, err := s.encodeMarker(m)
	if err != nil {
		return 0, err
	}
	return s.update(ctx, s.hooks, key, data, rev)
}

// DeleteMarker deletes the marker at rev; a stale rev is record.ErrConflict.
// The delete marker's revision is kept as the session's next CreateMarker's
// first expectation (markerHints).
func (s *Store) DeleteMarker(ctx context.Context, sessionID string, rev uint64) error {
	if err := subjects.ValidateSessionID(sessionID); err != nil {
		return invalid("%w", err)
	}
	deleted, err := s.remove(ctx, s.hooks, subjects.MarkerKey(sessionID), rev)
	if err == nil {
		s.markers.put(sessionID, deleted)
	}
	return err
}
