package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

// Records is session.Records (plus CreateSession, and the handoff
// transaction's store: markers.go) in memory: one revision
// counter over every key, as a KV bucket's stream sequence; a CAS at a
// stale revision is record.ErrConflict; leader reads are always current.
type Records struct {
	mu       sync.Mutex
	seq      uint64
	sessions map[string]entry[record.SessionRecord]
	hooks    map[string]entry[record.Hook]
	markers  map[string]entry[record.Marker]
	// BeforeUpdate, if set, runs before each UpdateSession is applied; a
	// non-nil error is returned instead, nothing written (a store that did
	// not answer, or a conflict forced by a test).
	BeforeUpdate func(rec record.SessionRecord, rev uint64) error
	// AfterUpdate, if set, runs after an UpdateSession landed; a non-nil
	// error is returned although the write landed (a lost reply).
	AfterUpdate func(rec record.SessionRecord, rev uint64) error
}

type entry[T any] struct {
	v   T
	rev uint64
}

// NewRecords returns an empty record store.
func NewRecords() *Records {
	return &Records{sessions: map[string]entry[record.SessionRecord]{}, hooks: map[string]entry[record.Hook]{},
		markers: map[string]entry[record.Marker]{}}
}

// CreateSession creates the record; an existing one is *record.OwnedError.
func (r *Records) CreateSession(_ context.Context, rec record.SessionRecord) (uint64, error) {
	if err := rec.Validate(); err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.sessions[rec.SessionID]; ok {
		return 0, &record.OwnedError{Key: rec.SessionID, SessionID: rec.SessionID, Owner: cur.v.OwnerRunID, Revision: cur.rev}
	}
	r.seq++
	r.sessions[rec.SessionID] = entry[record.SessionRecord]{rec, r.seq}
	return r.seq, nil
}

// UpdateSession writes rec if the record is at rev.
func (r *Records) UpdateSession(_ context.Context, rec record.SessionRecord, rev uint64) (uint64, error) {
	if err := rec.Validate(); err != nil {
		return 0, err
	}
	if rev == 0 {
		return 0, fmt.Errorf("%w: update %s: revision 0", record.ErrInvalid, rec.SessionID)
	}
	if f := r.BeforeUpdate; f != nil {
		if err := f(rec, rev); err != nil {
			return 0, err
		}
	}
	n, err := r.update(rec, rev)
	if err == nil && r.AfterUpdate != nil {
		if err := r.AfterUpdate(rec, n); err != nil {
			return 0, err
		}
	}
	return n, err
}

func (r *Records) update(rec record.SessionRecord, rev uint64) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.sessions[rec.SessionID]
	if !ok || cur.rev != rev {
		return 0, fmt.Errorf("%w: update %s at %d (is at %d)", record.ErrConflict, rec.SessionID, rev, cur.rev)
	}
	r.seq++
	r.sessions[rec.SessionID] = entry[record.SessionRecord]{rec, r.seq}
	return r.seq, nil
}

// LeaderSession reads the record.
func (r *Records) LeaderSession(_ context.Context, id string) (record.Session, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.sessions[id]
	if !ok {
		return record.Session{}, fmt.Errorf("%w: session %s", record.ErrNotFound, id)
	}
	return record.Session{Record: cur.v, Revision: cur.rev}, nil
}

// Settle reports whether the record carries the write (writer, counter);
// a missing record is false with no error, as kv's.
func (r *Records) Settle(ctx context.Context, id, writer string, counter uint64) (record.Session, bool, error) {
	cur, err := r.LeaderSession(ctx, id)
	if err != nil {
		return record.Session{}, false, nil
	}
	return cur, writer != "" && cur.Record.Writer == writer && cur.Record.WriteCounter == counter, nil
}

// SettleUpdate settles a write of rec at rev as kv's does. This store
// answers every write, so one leader read decides: landed, still at rev
// (gate, then the CAS again), or written by someone else (a conflict).
func (r *Records) SettleUpdate(ctx context.Context, rec record.SessionRecord, rev uint64, gate func(context.Context) error) (uint64, error) {
	cur, landed, err := r.Settle(ctx, rec.SessionID, rec.Writer, rec.WriteCounter)
	switch {
	case err != nil:
		return 0, err
	case landed:
		return cur.Revision, nil
	case cur.Revision != rev:
		return 0, fmt.Errorf("%w: session %s is at revision %d, not %d", record.ErrConflict, rec.SessionID, cur.Revision, rev)
	}
	if gate != nil {
		if err := gate(ctx); err != nil {
			return 0, err
		}
	}
	return r.UpdateSession(ctx, rec, rev)
}

// CreateHook claims an address, create-only; a live hook or a tombstone is
// *record.OwnedError naming its session.
func (r *Records) CreateHook(_ context.Context, h record.Hook) (uint64, error) {
	if err := h.Normalize(); err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.hooks[h.Token]; ok {
		return 0, &record.OwnedError{Key: subjects.HookKey(h.Token), SessionID: cur.v.SessionID, Ended: cur.v.Tombstone, Revision: cur.rev}
	}
	r.seq++
	r.hooks[h.Token] = entry[record.Hook]{h, r.seq}
	return r.seq, nil
}

// GetHook reads a hook.
func (r *Records) GetHook(_ context.Context, token string) (record.Hook, uint64, error) {
	if !subjects.ValidToken(token) {
		return record.Hook{}, 0, fmt.Errorf("%w: hook token %q", record.ErrInvalid, token)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.hooks[token]
	if !ok {
		return record.Hook{}, 0, fmt.Errorf("%w: hook %s", record.ErrNotFound, token)
	}
	return cur.v, cur.rev, nil
}

// Tombstone marks the hook at rev ended (idempotent on a tombstone).
func (r *Records) Tombstone(_ context.Context, token string, rev uint64) (uint64, error) {
	if !subjects.ValidToken(token) {
		return 0, fmt.Errorf("%w: hook token %q", record.ErrInvalid, token)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.hooks[token]
	switch {
	case !ok:
		return 0, fmt.Errorf("%w: hook %s", record.ErrNotFound, token)
	case cur.rev != rev:
		return 0, fmt.Errorf("%w: hook %s at %d (is at %d)", record.ErrConflict, token, rev, cur.rev)
	case cur.v.Tombstone:
		return rev, nil
	}
	cur.v.Tombstone, cur.v.EndedAt = true, time.Now().UTC()
	r.seq++
	r.hooks[token] = entry[record.Hook]{cur.v, r.seq}
	return r.seq, nil
}
