package memory

import (
	"context"
	"fmt"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

// What the handoff transaction needs of a record store (handoff.Store,
// handoff.Reader), in memory with kv's semantics: a direct get and the
// leader read are the same current read; SessionAt answers the record at
// exactly rev; markers are create-only and deleted by a revision CAS.
var (
	_ handoff.Store  = (*Records)(nil)
	_ handoff.Reader = (*Records)(nil)
)

// GetSession reads the record (kv's direct get; here always current).
func (r *Records) GetSession(ctx context.Context, id string) (record.Session, error) {
	return r.LeaderSession(ctx, id)
}

// SessionAt reads the record at exactly rev: a newer revision is
// record.ErrConflict, an older one (or none) record.ErrNotFound.
func (r *Records) SessionAt(ctx context.Context, id string, rev uint64) (record.Session, error) {
	cur, err := r.LeaderSession(ctx, id)
	switch {
	case err != nil:
		return record.Session{}, fmt.Errorf("%w: %s revision %d", record.ErrNotFound, id, rev)
	case cur.Revision < rev:
		return record.Session{}, fmt.Errorf("%w: %s revision %d (is at %d)", record.ErrNotFound, id, rev, cur.Revision)
	case cur.Revision > rev:
		return record.Session{}, fmt.Errorf("%w: %s is at revision %d, not %d", record.ErrConflict, id, cur.Revision, rev)
	}
	return cur, nil
}

// CreateMarker writes a session's handoff marker, create-only: an existing
// one is *record.OwnedError whose Owner is its handoff ID.
func (r *Records) CreateMarker(_ context.Context, m record.Marker) (uint64, error) {
	if err := m.Validate(); err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.markers[m.SessionID]; ok {
		return 0, &record.OwnedError{Key: subjects.MarkerKey(m.SessionID), SessionID: m.SessionID, Owner: cur.v.HandoffID, Revision: cur.rev}
	}
	r.seq++
	r.markers[m.SessionID] = entry[record.Marker]{m, r.seq}
	return r.seq, nil
}

// SessionWritten reads the record as written at rev. This store keeps
// only the newest record: it answers as SessionAt (a record that moved on
// is record.ErrConflict, which kv reports only when its direct get cannot
// serve rev).
func (r *Records) SessionWritten(ctx context.Context, id string, rev uint64) (record.Session, error) {
	return r.SessionAt(ctx, id, rev)
}

// MarkerHint reads a session's marker (kv's direct get; here always
// current).
func (r *Records) MarkerHint(ctx context.Context, id string) (record.Marker, uint64, error) {
	return r.GetMarker(ctx, id)
}

// GetMarker reads a session's marker; none is record.ErrNotFound.
func (r *Records) GetMarker(_ context.Context, id string) (record.Marker, uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.markers[id]
	if !ok {
		return record.Marker{}, 0, fmt.Errorf("%w: marker %s", record.ErrNotFound, id)
	}
	return cur.v, cur.rev, nil
}

// DeleteMarker deletes the marker at rev; a stale rev (or none) is
// record.ErrConflict.
func (r *Records) DeleteMarker(_ context.Context, id string, rev uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.markers[id]
	if !ok || cur.rev != rev {
		return fmt.Errorf("%w: delete marker %s at %d", record.ErrConflict, id, rev)
	}
	delete(r.markers, id)
	return nil
}
