package kv

import (
	"context"
	"slices"
	"time"

	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

// putHint writes v at key of the owners bucket: a hint (an index entry, a
// registration), a plain put whose every use is decided by a CAS elsewhere.
func (s *Store) putHint(ctx context.Context, key string, v any) error {
	data, err := s.owners.encode(key, v)
	if err != nil {
		return err
	}
	_, err = s.owners.kv.Put(ctx, key, data)
	return mapErr("put", key, err)
}

// purgeHint removes a hint, leaving a purge marker that expires after the
// bucket's marker TTL. Removing a missing one is not an error.
func (s *Store) purgeHint(ctx context.Context, key string) error {
	return mapErr("purge", key, s.owners.kv.Purge(ctx, key, jetstream.PurgeTTL(s.owners.markerTTL)))
}

// listHints calls each with every key of the owners bucket that pattern
// matches (one listing, keys only).
func (s *Store) listHints(ctx context.Context, pattern string, each func(key string)) error {
	l, err := s.owners.kv.ListKeysFiltered(ctx, pattern)
	if err != nil {
		return mapErr("list", pattern, err)
	}
	for key := range l.Keys() {
		each(key)
	}
	return ctx.Err()
}

// indexEntry is the value of baton_owners/index.<processID>.<sessionID>. The
// key carries the information; the value is for operators.
type indexEntry struct {
	ProcessID string    `json:"processId"`
	SessionID string    `json:"sessionId"`
	AddedAt   time.Time `json:"addedAt"`
}

func indexKey(processID, sessionID string) (string, error) {
	if err := validProcess(processID); err != nil {
		return "", err
	}
	if err := subjects.ValidateSessionID(sessionID); err != nil {
		return "", invalid("index %s: %w", processID, err)
	}
	return subjects.IndexKey(processID, sessionID), nil
}

// AddIndex records that processID owns (or is about to claim) sessionID. A
// process adds the entry before its claim CAS; a stale entry is harmless,
// since an adopter still claims by CAS. Idempotent.
func (s *Store) AddIndex(ctx context.Context, processID, sessionID string) error {
	key, err := indexKey(processID, sessionID)
	if err != nil {
		return err
	}
	return s.putHint(ctx, key, indexEntry{ProcessID: processID, SessionID: sessionID, AddedAt: s.now()})
}

// RemoveIndex removes one entry, leaving a purge marker that expires after
// the bucket's marker TTL. Removing a missing entry is not an error.
func (s *Store) RemoveIndex(ctx context.Context, processID, sessionID string) error {
	key, err := indexKey(processID, sessionID)
	if err != nil {
		return err
	}
	return s.purgeHint(ctx, key)
}

// ListIndex returns the session IDs in processID's index, sorted. It lists
// keys under index.<processID>. only, so an adopter never scans every session.
func (s *Store) ListIndex(ctx context.Context, processID string) ([]string, error) {
	if err := validProcess(processID); err != nil {
		return nil, err
	}
	var ids []string
	err := s.listHints(ctx, subjects.IndexKeys(processID), func(key string) {
		if pid, sid, err := subjects.ParseIndexKey(key); err == nil && pid == processID {
			ids = append(ids, sid)
		}
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}
