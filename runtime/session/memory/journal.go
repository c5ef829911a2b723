package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/session"
)

// Journal is session.JournalStore in memory: create-only entries with
// revisions; reads are always current (a leader read).
type Journal struct {
	mu      sync.Mutex
	seq     uint64
	entries map[string]entry[[]byte]
}

var _ session.JournalStore = (*Journal)(nil)

// NewJournal returns an empty journal store.
func NewJournal() *Journal { return &Journal{entries: map[string]entry[[]byte]{}} }

// Get implements session.JournalStore.
func (j *Journal) Get(_ context.Context, key string) ([]byte, uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	e, ok := j.entries[key]
	if !ok {
		return nil, 0, fmt.Errorf("%w: journal %s", record.ErrNotFound, key)
	}
	return slices.Clone(e.v), e.rev, nil
}

// Create implements session.JournalStore.
func (j *Journal) Create(_ context.Context, key string, data []byte) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.entries[key]; ok {
		return 0, fmt.Errorf("%w: journal %s", record.ErrExists, key)
	}
	j.seq++
	j.entries[key] = entry[[]byte]{slices.Clone(data), j.seq}
	return j.seq, nil
}

// Update implements session.JournalStore.
func (j *Journal) Update(_ context.Context, key string, data []byte, rev uint64) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if e, ok := j.entries[key]; !ok || e.rev != rev {
		return 0, fmt.Errorf("%w: journal %s is not at revision %d", record.ErrConflict, key, rev)
	}
	j.seq++
	j.entries[key] = entry[[]byte]{slices.Clone(data), j.seq}
	return j.seq, nil
}

// Delete implements session.JournalStore.
func (j *Journal) Delete(_ context.Context, key string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.entries, key)
	return nil
}
