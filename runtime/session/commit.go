package session

import (
	"context"
	"errors"
	"fmt"
	"github.com/baton-rt/baton/internal/failpoint"
	"strconv"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// record builds the session record a commit writes: ownership unchanged, the
// state derived from the snapshot, and the checkpoint with the new outbox
// stamped with this run's envelope. Content too large to keep inline (a
// long message.output text, agent state, an admitted delivery's text) is
// written to the session's blobs first, so the record stays small and
// always fits the bucket.
func (s *Session) record(ctx context.Context, snap runtime.Snapshot) (record.SessionRecord, []wire.Event, error) {
	now := s.now()
	outbox := make([]wire.Event, len(snap.Outbox))
	for i, e := range snap.Outbox {
		w, err := s.restamp(ctx, e, now)
		if err != nil {
			return record.SessionRecord{}, nil, err
		}
		outbox[i] = w
	}
	segs, tail, err := s.hist.layout(ctx, snap.History)
	if err != nil {
		return record.SessionRecord{}, nil, err
	}
	snap.History = tail
	c := toCheckpoint(s.id, snap, outbox, segs)
	if err := s.env.blobs.externalise(ctx, &c); err != nil {
		return record.SessionRecord{}, nil, err
	}
	cp, err := s.enc.Encode(c)
	if err != nil {
		return record.SessionRecord{}, nil, fmt.Errorf("session %s checkpoint: %w", s.id, err)
	}
	// This commit holds (or follows) a completed handoff's events: Commit
	// confirms it.
	rec, err := record.Commit(s.rec, s.rec.Ownership(), stateOf(snap), snap.Writer.Write, cp, s.progressed(snap))
	if err != nil {
		return record.SessionRecord{}, nil, err
	}
	rec.UpdatedAt = now
	s.nextRefs = refsOf(c)
	s.deriveIndex(rec, c, outbox)
	return rec, outbox, nil
}

// restamp keeps the stamp of an event already committed by this run (so a
// re-committed outbox does not change), and stamps a new one, storing a
// long message.output text out of line.
func (s *Session) restamp(ctx context.Context, e runtime.Event, now time.Time) (wire.Event, error) {
	if w, ok := s.pub.stamped(e); ok {
		return w, nil
	}
	switch e.Kind {
	case wire.EventMessageOutput:
		data, err := s.env.blobs.outputRef(ctx, s.id, e.Data)
		if err != nil {
			return wire.Event{}, err
		}
		e.Data = data
	case wire.EventTaskCompleted:
		data, err := s.env.blobs.resultRef(ctx, s.id, e.Data)
		if err != nil {
			return wire.Event{}, err
		}
		e.Data = data
	}
	return toWireEvent(s.id, s.runID, s.env.Deployment, now, e), nil
}

// committedState lets go of what the commit that just landed no longer
// needs: the journals of the steps it folded, and the blobs nothing it
// refers to any more (collectCommitted).
func (s *Session) committedState(ctx context.Context) {
	freed := s.removeJournals()
	old := s.refs
	s.refs = s.nextRefs
	s.collectCommitted(ctx, old, freed)
}

// removeJournals removes, after a commit landed, the journals of the steps
// it folded (or whose turn ended): every journaled step no longer due.
//
// It returns the out-of-line results those journals recorded or read.
func (s *Session) removeJournals() []string {
	var freed []string
	for key, j := range s.journals {
		if key == s.due {
			continue
		}
		delete(s.journals, key)
		freed = append(freed, j.resultBlobs()...)
		if n := j.positions(); n > 0 {
			in := j.in
			s.env.Process.Go(func(ctx context.Context) {
				for i := 1; i <= n; i++ {
					if err := s.env.Journal.Delete(ctx, subjects.JournalKey(s.id, in.TurnID, in.Step, i)); err != nil {
						s.log.Debug("journal entry not removed (it expires)", "turn", in.TurnID, "step", in.Step, "call", i, "err", err)
						return
					}
				}
			})
		}
	}
	return freed
}

// SettledState is the state a claimed session is in: paused or active (an
// ended record stays ended whatever this says).
func SettledState(snap runtime.Snapshot) record.State {
	if snap.Paused {
		return record.StatePaused
	}
	return record.StateActive
}

// InFlight reports a snapshot with a step due: an admitted turn that is
// open (the agent asked for another step, or an input reopened it) in a
// session that is neither paused nor ended. A process that dies with it so
// may have died of that step; one parked on a wait, idle or paused did not.
func InFlight(snap runtime.Snapshot) bool {
	return snap.Ended == "" && !snap.Paused && snap.Turn != nil && snap.Turn.Open
}

// dueStep names the step a snapshot has due, "<turnId>/<step>", or "" when
// none is in flight.
func dueStep(snap runtime.Snapshot) string {
	if !InFlight(snap) {
		return ""
	}
	return snap.Turn.ID + "/" + strconv.Itoa(snap.Turn.Steps+1)
}

// progressed reports whether a commit of snap shows progress, which resets
// the boot attempts: no step is in flight (idle, parked on a wait, paused,
// ended), or the step that was due at the last commit is not due any more
// (its result is folded, or its turn was cancelled). A boot or admission
// commit leaves that step, or a first one, due: no progress. (A session
// with queued deliveries admits the next turn in the commit that completes
// one: it is never without a step in flight while the queue lasts, yet
// each of those commits folds a step that did not kill the process.)
func (s *Session) progressed(snap runtime.Snapshot) bool {
	due := dueStep(snap)
	return due == "" || s.due != "" && due != s.due
}

func stateOf(snap runtime.Snapshot) record.State {
	switch {
	case snap.Ended != "":
		return record.StateEnded
	case snap.Paused:
		return record.StatePaused
	}
	return record.StateActive
}

// claimAlias claims a committed alias: its hook (create-only), then the
// consumer recreated at Applied.Next over the new token set, since an
// in-place filter update never rewinds (docs/nats-layout.md). A taken alias is
// dropped with a log line.
func (s *Session) claimAlias(ctx context.Context, alias string) error {
	tok, err := subjects.EncodeToken(alias)
	if err != nil {
		s.log.Warn("alias refused", "alias", alias, "err", err)
		return nil
	}
	_, err = s.env.Records.CreateHook(ctx, record.Hook{Token: tok, Address: alias, SessionID: s.id, WireV: wire.CurrentVersion})
	var owned *record.OwnedError
	if errors.As(err, &owned) && owned.SessionID != s.id {
		s.log.Warn("alias taken by another session; dropped", "alias", alias, "owner", owned.SessionID)
		return nil
	}
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("session: claim alias %q: %w", alias, err)
	}
	s.env.Failpoints.Run(failpoint.AliasHooked, failpoint.Args{SessionID: s.id, Detail: alias})
	s.cur.tokens = appendUnique(s.cur.tokens, tok)
	return s.reopen(ctx)
}

func appendUnique(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}

// cleanup is the idempotent clean-up after finalization: tombstone every
// address, delete the consumer, purge the timer, drop the index entry.
func (s *Session) cleanup(ctx context.Context, c runtime.Cleanup) error {
	if err := s.pub.await(); err != nil {
		return err
	}
	for _, t := range s.cur.tokens {
		if err := s.tombstone(ctx, t); err != nil {
			return err
		}
	}
	s.cur.close()
	if err := s.env.Inbox.Delete(ctx, s.cur.name); err != nil {
		return fmt.Errorf("session: delete consumer of ended %s: %w", s.id, err)
	}
	if err := s.env.Timers.Cancel(ctx, s.id); err != nil {
		s.log.Warn("cancel timer failed", "err", err)
	}
	s.cur.flushPurge(ctx, s.env.Process.LeaseValid(), s.log)
	if err := s.env.Process.RemoveIndex(ctx, s.id); err != nil && !errors.Is(err, record.ErrNotFound) {
		return err
	}
	s.log.Info("session ended", "reason", c.Reason)
	s.stopped = true
	return nil
}

func (s *Session) tombstone(ctx context.Context, tok string) error {
	h, rev, err := s.env.Records.GetHook(ctx, tok)
	if errors.Is(err, record.ErrNotFound) || err == nil && (h.Tombstone || h.SessionID != s.id) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := s.env.Records.Tombstone(ctx, tok, rev); err != nil && !errors.Is(err, record.ErrConflict) {
		return fmt.Errorf("session: tombstone %s: %w", tok, err)
	}
	return nil
}
