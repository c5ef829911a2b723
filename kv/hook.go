package kv

import (
	"context"
	"encoding/json"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

func (s *Store) encodeHook(h record.Hook) (string, []byte, error) {
	if err := h.Normalize(); err != nil {
		return "", nil, err
	}
	key := subjects.HookKey(h.Token)
	data, err := s.hooks.encode(key, h)
	return key, data, err
}

// CreateHook claims an address, create-only. A taken address (a live hook
// or a tombstone) is an *record.OwnedError naming the owning session (Ended for a
// tombstone).
func (s *Store) CreateHook(ctx context.Context, h record.Hook) (uint64, error) {
	key, data, err := s.encodeHook(h)
	if err != nil {
		return 0, err
	}
	return s.claim(ctx, s.hooks, key, s.hooks.kvWrite(key, data), hookHolder)
}

func hookHolder(e entry) *record.OwnedError {
	var h record.Hook
	if json.Unmarshal(e.data, &h) != nil {
		return nil
	}
	return &record.OwnedError{SessionID: h.SessionID, Ended: h.Tombstone}
}

// GetHook reads an address's hook by direct get (a hint on a cluster; the
// claim itself is CreateHook's CAS).
func (s *Store) GetHook(ctx context.Context, token string) (record.Hook, uint64, error) {
	if !subjects.ValidToken(token) {
		return record.Hook{}, 0, invalid("hook token %q is not a canonical encoded token", token)
	}
	e, err := s.hooks.get(ctx, subjects.HookKey(token))
	if err != nil {
		return record.Hook{}, 0, err
	}
	var h record.Hook
	if err := decode(e, &h); err != nil {
		return record.Hook{}, 0, err
	}
	return h, e.rev, nil
}

// UpdateHook replaces a hook at rev (e.g. a new wire-version stamp).
func (s *Store) UpdateHook(ctx context.Context, h record.Hook, rev uint64) (uint64, error) {
	key, data, err := s.encodeHook(h)
	if err != nil {
		return 0, err
	}
	return s.update(ctx, s.hooks, key, data, rev)
}

// Tombstone marks the hook at rev as belonging to an ended session. The hook
// stays (a tombstone is taken for CreateHook). A stale rev is record.ErrConflict.
func (s *Store) Tombstone(ctx context.Context, token string, rev uint64) (uint64, error) {
	if !subjects.ValidToken(token) {
		return 0, invalid("hook token %q is not a canonical encoded token", token)
	}
	key := subjects.HookKey(token)
	e, err := s.leaderAt(ctx, s.hooks, key, rev)
	if err != nil {
		return 0, err
	}
	var h record.Hook
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
	return s.update(ctx, s.hooks, key, data, rev)
}

// DeleteHook deletes a hook at rev; the address can then be claimed again.
// A stale rev is record.ErrConflict and deletes nothing.
func (s *Store) DeleteHook(ctx context.Context, token string, rev uint64) error {
	if !subjects.ValidToken(token) {
		return invalid("hook token %q is not a canonical encoded token", token)
	}
	_, err := s.remove(ctx, s.hooks, subjects.HookKey(token), rev)
	return err
}

// LeaderHook reads an address's hook from the stream leader: what a reader
// uses to confirm a direct get's "not found" (a replica may not have
// applied a hook created a moment ago). A hook whose newest message is a
// delete marker is record.ErrNotFound.
func (s *Store) LeaderHook(ctx context.Context, token string) (record.Hook, uint64, error) {
	if !subjects.ValidToken(token) {
		return record.Hook{}, 0, invalid("hook token %q is not a canonical encoded token", token)
	}
	e, err := s.leaderLast(ctx, s.hooks, subjects.HookKey(token))
	if err != nil {
		return record.Hook{}, 0, err
	}
	var h record.Hook
	if err := decode(e, &h); err != nil {
		return record.Hook{}, 0, err
	}
	return h, e.rev, nil
}
