package kv

import (
	"context"
	"slices"
	"time"

	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

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
	data, err := s.owners.encode(key, indexEntry{ProcessID: processID, SessionID: sessionID, AddedAt: s.now()})
	if err != nil {
		return err
	}
	_, err = s.owners.kv.Put(ctx, key, data)
	return mapErr("put", key, err)
}

// RemoveIndex removes one entry, leaving a purge marker that expires after
// the bucket's marker TTL. Removing a missing entry is not an error.
func (s *Store) RemoveIndex(ctx context.Context, processID, sessionID string) error {
	key, err := indexKey(processID, sessionID)
	if err != nil {
		return err
	}
	return mapErr("purge", key, s.owners.kv.Purge(ctx, key, jetstream.PurgeTTL(s.owners.markerTTL)))
}

// ListIndex returns the session IDs in processID's index, sorted. It lists
// keys under index.<processID>. only, so an adopter never scans every session.
func (s *Store) ListIndex(ctx context.Context, processID string) ([]string, error) {
	if err := validProcess(processID); err != nil {
		return nil, err
	}
	pattern := subjects.IndexKeys(processID)
	l, err := s.owners.kv.ListKeysFiltered(ctx, pattern)
	if err != nil {
		return nil, mapErr("list", pattern, err)
	}
	var ids []string
	for key := range l.Keys() {
		if pid, sid, err := subjects.ParseIndexKey(key); err == nil && pid == processID {
			ids = append(ids, sid)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}
