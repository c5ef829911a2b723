package handoff

import (
	"context"

	"github.com/baton-rt/baton/record"
)

// Store is the part of kv.Store the transaction needs (kv implements it; the
// compile-time check lives in this package's tests). Its semantics are
// kv's: UpdateSession and DeleteMarker are revision CASes (a lost one is
// record.ErrConflict), CreateMarker is create-only (a taken key is a
// *record.OwnedError), LeaderSession, SessionAt and GetMarker are leader reads,
// and SessionAt retries until the leader holds the revision asked for.
// SessionWritten is the record as written at a revision, which may have
// moved on since (a direct get by sequence, else as SessionAt); MarkerHint
// is a direct get, possibly older than the leader's marker or already
// removed there.
type Store interface {
	LeaderSession(ctx context.Context, id string) (record.Session, error)
	SessionAt(ctx context.Context, id string, rev uint64) (record.Session, error)
	SessionWritten(ctx context.Context, id string, rev uint64) (record.Session, error)
	UpdateSession(ctx context.Context, rec record.SessionRecord, rev uint64) (uint64, error)
	CreateMarker(ctx context.Context, m record.Marker) (uint64, error)
	GetMarker(ctx context.Context, sessionID string) (record.Marker, uint64, error)
	MarkerHint(ctx context.Context, sessionID string) (record.Marker, uint64, error)
	DeleteMarker(ctx context.Context, sessionID string, rev uint64) error
}

// Reader is what Resolve needs: Store's leader reads plus kv's direct get
// (a hint, tried first).
type Reader interface {
	GetSession(ctx context.Context, id string) (record.Session, error)
	LeaderSession(ctx context.Context, id string) (record.Session, error)
	GetMarker(ctx context.Context, sessionID string) (record.Marker, uint64, error)
}
