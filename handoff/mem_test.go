package handoff_test

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

// memStore is an in-memory store with kv's semantics (revision CAS,
// create-only markers, leader reads that are always current). The same
// scenarios run against it and against kv over a real server.
type memStore struct {
	mu      sync.Mutex
	seq     uint64
	records map[string]memRecord
	markers map[string]memMarker
}

type memRecord struct {
	rec record.SessionRecord
	rev uint64
}

type memMarker struct {
	m   record.Marker
	rev uint64
}

func newMemStore() *memStore {
	return &memStore{records: map[string]memRecord{}, markers: map[string]memMarker{}}
}

func (s *memStore) CreateSession(_ context.Context, rec record.SessionRecord) (uint64, error) {
	if err := rec.Validate(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.records[rec.SessionID]; ok {
		return 0, &record.OwnedError{Key: rec.SessionID, SessionID: rec.SessionID, Owner: cur.rec.OwnerRunID, Revision: cur.rev}
	}
	s.seq++
	s.records[rec.SessionID] = memRecord{rec, s.seq}
	return s.seq, nil
}

func (s *memStore) UpdateSession(_ context.Context, rec record.SessionRecord, rev uint64) (uint64, error) {
	if err := rec.Validate(); err != nil {
		return 0, err
	}
	if rev == 0 {
		return 0, fmt.Errorf("%w: revision 0", record.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[rec.SessionID]
	if !ok || cur.rev != rev {
		return 0, fmt.Errorf("%w: update %s at %d (is at %d)", record.ErrConflict, rec.SessionID, rev, cur.rev)
	}
	s.seq++
	s.records[rec.SessionID] = memRecord{rec, s.seq}
	return s.seq, nil
}

func (s *memStore) get(id string) (record.Session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.records[id]
	return record.Session{Record: cur.rec, Revision: cur.rev}, ok
}

func (s *memStore) GetSession(_ context.Context, id string) (record.Session, error) {
	if cur, ok := s.get(id); ok {
		return cur, nil
	}
	return record.Session{}, fmt.Errorf("%w: %s", record.ErrNotFound, id)
}

func (s *memStore) LeaderSession(ctx context.Context, id string) (record.Session, error) {
	return s.GetSession(ctx, id)
}

func (s *memStore) SessionAt(_ context.Context, id string, rev uint64) (record.Session, error) {
	cur, ok := s.get(id)
	switch {
	case !ok || cur.Revision < rev:
		return record.Session{}, fmt.Errorf("%w: %s revision %d", record.ErrNotFound, id, rev)
	case cur.Revision > rev:
		return record.Session{}, fmt.Errorf("%w: %s is at revision %d, not %d", record.ErrConflict, id, cur.Revision, rev)
	}
	return cur, nil
}

func (s *memStore) CreateMarker(_ context.Context, m record.Marker) (uint64, error) {
	if err := subjects.ValidateDeployment(m.Target); err != nil || m.HandoffID == "" {
		return 0, fmt.Errorf("%w: marker", record.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.markers[m.SessionID]; ok {
		return 0, &record.OwnedError{Key: subjects.MarkerKey(m.SessionID), SessionID: m.SessionID, Owner: cur.m.HandoffID, Revision: cur.rev}
	}
	s.seq++
	s.markers[m.SessionID] = memMarker{m, s.seq}
	return s.seq, nil
}

func (s *memStore) GetMarker(_ context.Context, id string) (record.Marker, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.markers[id]
	if !ok {
		return record.Marker{}, 0, fmt.Errorf("%w: marker %s", record.ErrNotFound, id)
	}
	return cur.m, cur.rev, nil
}

func (s *memStore) DeleteMarker(_ context.Context, id string, rev uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.markers[id]
	if !ok || cur.rev != rev {
		return fmt.Errorf("%w: delete marker %s at %d", record.ErrConflict, id, rev)
	}
	delete(s.markers, id)
	return nil
}

// memInbox is an in-memory inbox: sequences by token.
type memInbox struct {
	mu   sync.Mutex
	seq  uint64
	msgs map[string][]uint64
}

func newMemInbox() *memInbox { return &memInbox{msgs: map[string][]uint64{}} }

func (b *memInbox) publish(token string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	b.msgs[token] = append(b.msgs[token], b.seq)
	return b.seq
}

func (b *memInbox) holds(seq uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, seqs := range b.msgs {
		if slices.Contains(seqs, seq) {
			return true
		}
	}
	return false
}

func (b *memInbox) After(_ context.Context, tokens []string, seq uint64) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var first uint64
	for _, t := range tokens {
		for _, s := range b.msgs[t] {
			if s > seq && (first == 0 || s < first) {
				first = s
			}
		}
	}
	return first, nil
}
