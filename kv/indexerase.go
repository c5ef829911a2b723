package kv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

// Erase removes session id's entry and every posting of it, those its
// entry does not list too (a stale one a write interrupted by a crash
// left): a delete's removal. Postings are found by one listing of the
// keys p.*.*.<hour>.<order>.<id> — the hour and order of its creation
// time, from the entry or, without one, createdAt — whose cost grows with
// the index's distinct dimension values, not with its postings. Hour
// markers stay: other sessions of the hour share them.
func (x *Index) Erase(ctx context.Context, id string, createdAt time.Time) error {
	if err := subjects.ValidateSessionID(id); err != nil {
		return invalid("index erase: %w", err)
	}
	cur, rev, err := x.Get(ctx, id)
	switch {
	case err == nil:
		createdAt = cur.CreatedAt
		if err := x.deleteSeq(ctx, rev); err != nil {
			return err
		}
	case !errors.Is(err, record.ErrNotFound):
		return err
	}
	if createdAt.IsZero() {
		return nil // neither entry nor creation time: it had no postings to find
	}
	keys, err := x.keys(ctx, "p.*.*."+subjects.IndexHour(createdAt)+"."+subjects.IndexOrder(createdAt)+"."+id)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := x.stream.Purge(ctx, jetstream.WithPurgeSubject(x.prefix+k)); err != nil {
			return fmt.Errorf("kv: index purge %s: %w", k, err)
		}
	}
	return nil
}
