package kv

import (
	"context"
	"encoding/json"
	"time"

	"github.com/baton-rt/baton/subjects"
)

// Hook is the value of baton_hooks/tok.<token>: which session an address
// (the stable token or an alias) belongs to. A tombstone stays after the
// session ended, so the address is never claimed again (the ingress answers
// 410 for it).
type Hook struct {
	Token     string    `json:"token"`       // encoded token (subjects.EncodeToken)
	Address   string    `json:"address"`     // raw address; filled from Token when empty
	SessionID string    `json:"sessionId"`   // owning session
	WireV     int       `json:"wireVersion"` // inbox wire version the owner accepts
	Tombstone bool      `json:"tombstone"`
	EndedAt   time.Time `json:"endedAt,omitzero"`
}

// normalize validates h and fills Address from Token.
func (h *Hook) normalize() error {
	if !subjects.ValidToken(h.Token) {
		return invalid("hook token %q is not a canonical encoded token", h.Token)
	}
	if err := subjects.ValidateSessionID(h.SessionID); err != nil {
		return invalid("hook %s: %w", h.Token, err)
	}
	raw, _ := subjects.DecodeToken(h.Token)
	if h.Address == "" {
		h.Address = raw
	}
	if h.Address != raw {
		return invalid("hook %s: address %q does not encode to the token", h.Token, h.Address)
	}
	return nil
}

func (s *Store) encodeHook(h Hook) (string, []byte, error) {
	if err := h.normalize(); err != nil {
		return "", nil, err
	}
	key := subjects.HookKey(h.Token)
	data, err := s.hooks.encode(key, h)
	return key, data, err
}

// CreateHook claims an address, create-only. A taken address (a live hook
// or a tombstone) is an *OwnedError naming the owning session (Ended for a
// tombstone).
func (s *Store) CreateHook(ctx context.Context, h Hook) (uint64, error) {
	key, data, err := s.encodeHook(h)
	if err != nil {
		return 0, err
	}
	return s.claim(ctx, s.hooks, key, s.hooks.kvWrite(key, data), hookHolder)
}

func hookHolder(e entry) *OwnedError {
	var h Hook
	if json.Unmarshal(e.data, &h) != nil {
		return nil
	}
	return &OwnedError{SessionID: h.SessionID, Ended: h.Tombstone}
}

// GetHook reads an address's hook by direct get (a hint on a cluster; the
// claim itself is CreateHook's CAS).
func (s *Store) GetHook(ctx context.Context, token string) (Hook, uint64, error) {
	if !subjects.ValidToken(token) {
		return Hook{}, 0, invalid("hook token %q is not a canonical encoded token", token)
	}
	e, err := s.hooks.get(ctx, subjects.HookKey(token))
	if err != nil {
		return Hook{}, 0, err
	}
	var h Hook
	if err := decode(e, &h); err != nil {
		return Hook{}, 0, err
	}
	return h, e.rev, nil
}

// UpdateHook replaces a hook at rev (e.g. a new wire-version stamp).
func (s *Store) UpdateHook(ctx context.Context, h Hook, rev uint64) (uint64, error) {
	key, data, err := s.encodeHook(h)
	if err != nil {
		return 0, err
	}
	return s.hooks.update(ctx, key, data, rev)
}

// Tombstone marks the hook at rev as belonging to an ended session. The hook
// stays (a tombstone is taken for CreateHook). A stale rev is ErrConflict.
func (s *Store) Tombstone(ctx context.Context, token string, rev uint64) (uint64, error) {
	if !subjects.ValidToken(token) {
		return 0, invalid("hook token %q is not a canonical encoded token", token)
	}
	key := subjects.HookKey(token)
	e, err := s.leaderAt(ctx, s.hooks, key, rev)
	if err != nil {
		return 0, err
	}
	var h Hook
	if err := decode(e, &h); err != nil {
		return 0, err
	}
	if h.Tombstone {
		return rev, nil
	}
	h.Tombstone, h.EndedAt = true, s.now()
	_, data, err := s.encodeHook(h)
	if err != nil {
		return 0, err
	}
	return s.hooks.update(ctx, key, data, rev)
}

// DeleteHook deletes a hook at rev; the address can then be claimed again.
// A stale rev is ErrConflict and deletes nothing.
func (s *Store) DeleteHook(ctx context.Context, token string, rev uint64) error {
	if !subjects.ValidToken(token) {
		return invalid("hook token %q is not a canonical encoded token", token)
	}
	return s.hooks.remove(ctx, subjects.HookKey(token), rev)
}
