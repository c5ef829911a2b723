package memory

import (
	"context"
	"sync"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/session"
)

// Index is session.Index in memory: one entry per session, an entry
// derived from an older record revision ignored, storage news added (a
// recount replaces it), a zero creation time keeping the stored one.
type Index struct {
	mu      sync.Mutex
	entries map[string]record.IndexEntry
}

var _ session.Index = (*Index)(nil)

// NewIndex returns an empty index.
func NewIndex() *Index { return &Index{entries: map[string]record.IndexEntry{}} }

// Write implements session.Index.
func (x *Index) Write(_ context.Context, e record.IndexEntry) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	cur, found := x.entries[e.SessionID]
	if found && cur.Revision > e.Revision {
		return nil
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = cur.CreatedAt
		if e.CreatedAt.IsZero() {
			e.CreatedAt = time.Now().UTC()
		}
	}
	if e.Storage == nil && (cur.Storage != nil || e.Grew != nil) {
		var st record.Storage
		if cur.Storage != nil {
			st = *cur.Storage
		}
		if e.Grew != nil {
			st = st.Plus(*e.Grew)
		}
		e.Storage = &st
	}
	e.Grew = nil
	x.entries[e.SessionID] = e
	return nil
}

// Get returns a session's entry (false: none).
func (x *Index) Get(sessionID string) (record.IndexEntry, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.entries[sessionID]
	return e, ok
}
