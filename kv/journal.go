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

// JournalTTL is the per-key TTL of a journal entry: a safety net for the
// entries of a step whose commit never removed them (its session ended or
// was quarantined mid-step). A step re-run after it starts afresh.
const JournalTTL = 7 * 24 * time.Hour

// Journal stores steps' journals in the journal bucket (baton_journal):
// create-only entries under subjects.JournalKey, each with a per-key TTL,
// read from the stream leader. It implements session.JournalStore.
type Journal struct {
	s *Store
	b bucket
}

// OpenJournal opens the journal bucket (topology.Ensure creates it).
func OpenJournal(ctx context.Context, js jetstream.JetStream, names subjects.Names) (*Journal, error) {
	b, err := openBucket(ctx, js, names.JournalBucket())
	if err != nil {
		return nil, err
	}
	if b.markerTTL <= 0 || b.history != 1 {
		return nil, fmt.Errorf("kv: bucket %s needs LimitMarkerTTL and one revision per key (create it with topology.Ensure)", b.name)
	}
	return &Journal{s: &Store{js: js}, b: b}, nil // the Store for its leader reads and TTL writes
}

// Get reads an entry from the leader; none (or a removed one) is
// record.ErrNotFound.
func (j *Journal) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := j.s.leaderLast(ctx, j.b, key)
	if err != nil {
		return nil, 0, err
	}
	if !e.live() {
		return nil, 0, fmt.Errorf("%w: %s/%s was removed", record.ErrNotFound, j.b.name, key)
	}
	return e.data, e.rev, nil
}

// Create writes key if it holds no entry (a removed one's marker may be
// written over); a live entry is record.ErrExists.
func (j *Journal) Create(ctx context.Context, key string, data []byte) (uint64, error) {
	if j.b.maxValue > 0 && len(data) > j.b.maxValue {
		return 0, fmt.Errorf("%w: %s/%s is %d bytes, the bucket accepts %d", record.ErrTooLarge, j.b.name, key, len(data), j.b.maxValue)
	}
	rev, err := j.s.claim(ctx, j.b, key, j.s.ttlWrite(j.b, key, data, JournalTTL), func(entry) *record.OwnedError { return nil })
	var owned *record.OwnedError
	if errors.As(err, &owned) {
		return 0, fmt.Errorf("%w: %s/%s", record.ErrExists, j.b.name, key)
	}
	return rev, err
}

// Update replaces the entry at rev (a stale rev is record.ErrConflict; a
// replicated stream's transient refusal is settled as in Store.update).
func (j *Journal) Update(ctx context.Context, key string, data []byte, rev uint64) (uint64, error) {
	write := j.s.ttlWrite(j.b, key, data, JournalTTL)
	return j.s.settleCAS(ctx, j.b, key, rev, func() (uint64, error) { return write(ctx, rev) })
}

// Delete removes key (a purge marker that itself expires after the
// bucket's marker TTL); a missing one is not an error.
func (j *Journal) Delete(ctx context.Context, key string) error {
	err := j.b.kv.Purge(ctx, key, jetstream.PurgeTTL(j.b.markerTTL))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return mapErr("delete", key, err)
	}
	return nil
}
