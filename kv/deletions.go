package kv

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

// The delete index (docs/kv-records.md, "What a sweep reads"): a hint in
// the owners bucket, deleting.<sessionID>, for every delete asked for and
// not carried out yet — written before the request (or, for a forced
// delete of a live session, before its end), removed by the owner that
// writes the tombstone. Every owner's sweep lists it, so a delete asked
// while no owner ran, or whose finisher died, is carried out.

// Deletion is one entry of the delete index.
type Deletion struct {
	SessionID string    `json:"sessionId"`
	Reason    string    `json:"reason"` // record.DeleteByUser, …
	Force     bool      `json:"force,omitempty"`
	AddedAt   time.Time `json:"addedAt"`
}

func deletionKey(sessionID string) (string, error) {
	if err := subjects.ValidateSessionID(sessionID); err != nil {
		return "", invalid("delete index: %w", err)
	}
	return subjects.DeletionKey(sessionID), nil
}

// AddDeletion records that d's delete was asked for. Idempotent.
func (s *Store) AddDeletion(ctx context.Context, d Deletion) error {
	key, err := deletionKey(d.SessionID)
	if err != nil {
		return err
	}
	if d.AddedAt.IsZero() {
		d.AddedAt = s.now()
	}
	return s.putHint(ctx, key, d)
}

// RemoveDeletion removes session id's entry once it is deleted (or can
// never be). Removing a missing one is not an error.
func (s *Store) RemoveDeletion(ctx context.Context, id string) error {
	key, err := deletionKey(id)
	if err != nil {
		return err
	}
	return s.purgeHint(ctx, key)
}

// ListDeletions returns every entry of the delete index, by session ID:
// one listing of the keys, then each value (a direct get).
func (s *Store) ListDeletions(ctx context.Context) ([]Deletion, error) {
	var ids []string
	err := s.listHints(ctx, subjects.DeletionKeys(), func(key string) {
		if id, err := subjects.ParseDeletionKey(key); err == nil {
			ids = append(ids, id)
		}
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	out := make([]Deletion, 0, len(ids))
	for _, id := range ids {
		e, err := s.owners.kv.Get(ctx, subjects.DeletionKey(id))
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			continue
		case err != nil:
			return nil, mapErr("get", subjects.DeletionKey(id), err)
		}
		d := Deletion{SessionID: id, Reason: record.DeleteByUser}
		_ = json.Unmarshal(e.Value(), &d) // a value this build cannot read: a user's delete
		d.SessionID = id
		out = append(out, d)
	}
	return out, nil
}
