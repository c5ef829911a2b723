package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/baton-rt/baton/internal/stages"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

func (s *Store) encodeSession(rec record.SessionRecord) (string, []byte, error) {
	if err := rec.Validate(); err != nil {
		return "", nil, err
	}
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = s.now()
	}
	key := subjects.SessionKey(rec.SessionID)
	data, err := s.sessions.encode(key, rec)
	return key, data, err
}

// CreateSession writes a new session record, create-only (over a deleted
// record too). A loser gets an *record.OwnedError naming the holder's owner run.
func (s *Store) CreateSession(ctx context.Context, rec record.SessionRecord) (uint64, error) {
	key, data, err := s.encodeSession(rec)
	if err != nil {
		return 0, err
	}
	return s.claim(ctx, s.sessions, key, s.sessions.kvWrite(key, data), sessionHolder)
}

func sessionHolder(e entry) *record.OwnedError {
	var r record.SessionRecord
	if json.Unmarshal(e.data, &r) != nil {
		return nil
	}
	return &record.OwnedError{SessionID: r.SessionID, Owner: r.OwnerRunID, Ended: r.State == record.StateEnded}
}

// UpdateSession replaces the record if it is still at rev (the fence). A
// stale rev is record.ErrConflict and writes nothing.
func (s *Store) UpdateSession(ctx context.Context, rec record.SessionRecord, rev uint64) (uint64, error) {
	key, data, err := s.encodeSession(rec)
	if err != nil {
		return 0, err
	}
	stages.Mark(rec.SessionID, "record")
	return s.update(ctx, s.sessions, key, data, rev)
}

// DeleteSession deletes the record if it is still at rev; a stale rev is
// record.ErrConflict and deletes nothing.
func (s *Store) DeleteSession(ctx context.Context, id string, rev uint64) error {
	if err := subjects.ValidateSessionID(id); err != nil {
		return invalid("%w", err)
	}
	_, err := s.remove(ctx, s.sessions, subjects.SessionKey(id), rev)
	return err
}

// ListSessions returns the IDs of every live session record (deleted ones
// excluded), sorted. It lists keys only; read a record with GetSession (a
// hint) or LeaderSession. It costs one pass over every key of the bucket,
// so it is for an operator's report, never for a sweep or a hot path.
func (s *Store) ListSessions(ctx context.Context) ([]string, error) {
	l, err := s.sessions.kv.ListKeys(ctx)
	if err != nil {
		return nil, mapErr("list", s.sessions.name, err)
	}
	var ids []string
	for key := range l.Keys() {
		if subjects.ValidateSessionID(key) == nil {
			ids = append(ids, key)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
}

// GetSession reads the record by direct get. On a cluster any replica may
// answer, so it can be stale: a hint, never a basis for ownership.
func (s *Store) GetSession(ctx context.Context, id string) (record.Session, error) {
	if err := subjects.ValidateSessionID(id); err != nil {
		return record.Session{}, invalid("%w", err)
	}
	e, err := s.sessions.get(ctx, subjects.SessionKey(id))
	if err != nil {
		return record.Session{}, err
	}
	return decodeSession(e)
}

// LeaderSession reads the newest record from the stream leader.
func (s *Store) LeaderSession(ctx context.Context, id string) (record.Session, error) {
	if err := subjects.ValidateSessionID(id); err != nil {
		return record.Session{}, invalid("%w", err)
	}
	e, err := s.leaderLast(ctx, s.sessions, subjects.SessionKey(id))
	if err != nil {
		return record.Session{}, err
	}
	return decodeSession(e)
}

// SessionAt returns the record at exactly rev (a handoff candidate loads the
// revision it was told about). It reads the leader, retrying briefly until
// the leader has rev; a newer revision is record.ErrConflict, a revision that never
// appears is record.ErrNotFound.
func (s *Store) SessionAt(ctx context.Context, id string, rev uint64) (record.Session, error) {
	if err := subjects.ValidateSessionID(id); err != nil {
		return record.Session{}, invalid("%w", err)
	}
	e, err := s.leaderAt(ctx, s.sessions, subjects.SessionKey(id), rev)
	if err != nil {
		return record.Session{}, err
	}
	return decodeSession(e)
}

// Settle resolves an uncertain write (docs/runtime.md) by a leader read: true
// if the current record carries the write (writer, counter), so the write
// landed and is still the newest; false otherwise — the writer is fenced.
// A missing or deleted record is false with a zero record.Session and no error.
func (s *Store) Settle(ctx context.Context, id, writer string, counter uint64) (record.Session, bool, error) {
	cur, err := s.LeaderSession(ctx, id)
	if errors.Is(err, record.ErrNotFound) {
		return record.Session{}, false, nil
	}
	if err != nil {
		return record.Session{}, false, err
	}
	landed := writer != "" && cur.Record.Writer == writer && cur.Record.WriteCounter == counter
	return cur, landed, nil
}

func decodeSession(e entry) (record.Session, error) {
	var r record.SessionRecord
	if err := decode(e, &r); err != nil {
		return record.Session{}, err
	}
	return record.Session{Record: r, Revision: e.rev}, nil
}

// SessionWritten returns the record as it was written at revision rev,
// whatever came after it: the message at that stream sequence, by a direct
// get, which the server answers outside its queue of JetStream API
// requests and any replica holding it may answer (a message at a sequence
// never changes). Only a CAS at rev tells whether the record is still at
// rev: a handoff candidate reads the staged revision so and claims it by
// that CAS. A server that lacks the sequence (a lagging replica, a
// revision past the bucket's history) is asked again as SessionAt asks,
// which also tells a newer revision (record.ErrConflict); so is a direct
// get that fails otherwise. A message at rev that is not a live record of
// the session is record.ErrNotFound.
func (s *Store) SessionWritten(ctx context.Context, id string, rev uint64) (record.Session, error) {
	if err := subjects.ValidateSessionID(id); err != nil {
		return record.Session{}, invalid("%w", err)
	}
	if rev == 0 {
		return record.Session{}, invalid("read %s at revision 0", id)
	}
	key := subjects.SessionKey(id)
	m, err := Stream{l: s.sessions.leader}.Direct(ctx, rev)
	if err != nil {
		if ctx.Err() != nil {
			return record.Session{}, err
		}
		return s.SessionAt(ctx, id, rev)
	}
	e := entry{key: key, rev: m.Sequence, data: m.Data, op: markerOp(m.Header)}
	if m.Subject != subjects.KVSubject(s.sessions.name, key) || !e.live() {
		return record.Session{}, fmt.Errorf("%w: %s revision %d is not a record of session %s", record.ErrNotFound, s.sessions.name, rev, id)
	}
	return decodeSession(e)
}
