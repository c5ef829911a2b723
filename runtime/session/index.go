package session

import (
	"context"
	"errors"
	"time"

	"github.com/baton-rt/baton/internal/failpoint"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// indexer keeps one session's entry of the session index: it writes only
// when what the entry says changes (its deployment, state, tags, aliases,
// durable waits or epoch) — not per turn or per commit — in the
// background, and never fails the session: a lost write is the
// reconciler's to heal.
type indexer struct {
	last    record.IndexEntry // the last entry sent (zero: none this run)
	next    record.IndexEntry // derived from the commit in flight
	counted int64             // the appended event bytes the entries sent so far told
}

// deriveIndex records the entry of the commit being built from its checkpoint
// c; a commit that records session.started gives its creation time.
func (s *Session) deriveIndex(rec record.SessionRecord, c wire.Checkpoint, outbox []wire.Event) {
	if s.env.Index == nil {
		return
	}
	e := record.DeriveIndex(rec, 0, c, s.env.AgentName)
	e.Grew = &record.Storage{Events: c.EventSeq}
	for _, ev := range outbox {
		if ev.Kind == wire.EventSessionStarted {
			e.CreatedAt = ev.Time
		}
	}
	s.ix.next = e
}

// indexCommitted writes the entry of the commit that landed at rev, if it
// says something new.
func (s *Session) indexCommitted(rev uint64) {
	e := s.ix.next
	e.Revision = rev
	s.writeIndex(e)
}

// indexState writes the entry of a record change outside a commit (a
// hibernation) at rev: the last entry with the record's state and epoch.
func (s *Session) indexState(rec record.SessionRecord, rev uint64) {
	if s.env.Index == nil || s.ix.last.SessionID == "" && s.ix.next.SessionID == "" {
		return
	}
	e := s.ix.last
	if e.SessionID == "" {
		e = s.ix.next
	}
	e.State, e.Epoch, e.DeploymentID, e.OwnerProcess, e.Revision = rec.State, rec.Epoch, rec.DeploymentID, rec.OwnerProcess, rev
	s.writeIndex(e)
}

// IndexWriteBudget bounds how long an owner keeps trying one write of its
// session's index entry (a leader election, a reconnect) before it leaves
// it to the reconciler.
const IndexWriteBudget = 2 * time.Minute

func (s *Session) writeIndex(e record.IndexEntry) {
	if s.env.Index == nil || e.SessionID == "" {
		return
	}
	if s.ix.last.SessionID != "" && s.ix.last.Same(e) {
		return
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = s.ix.last.CreatedAt
	}
	e.Writer = "owner-" + s.rec.OwnerProcess
	appended := s.pub.bytes.Load()
	grew := record.Storage{EventBytes: appended - s.ix.counted}
	if e.Grew != nil {
		grew.Events = e.Grew.Events
	}
	e.Grew, s.ix.counted = &grew, appended
	s.ix.last = e
	if s.env.Failpoints.Hit(failpoint.BeforeIndexWrite, failpoint.Args{SessionID: s.id, Detail: string(e.State)}) {
		s.log.Debug("index write dropped (failpoint)", "state", e.State)
		return
	}
	s.env.Process.Go(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, IndexWriteBudget)
		defer cancel()
		if err := s.env.Index.Write(ctx, e); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("session index entry not written (the reconciler heals it)", "state", e.State, "err", err)
		}
	})
}
