package session

import (
	"context"
	"errors"
	"fmt"
	"github.com/baton-rt/baton/internal/failpoint"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
)

// Hibernation (docs/runtime.md, docs/driver.md "Hibernation"): a quiet session
// leaves memory and deletes its cursor, so an owner process holds only its
// active sessions. The record says `hibernated`; any owner process of the
// deployment loads it again on a wake.

// Activity is a session's activity as its process sees it: when it was
// last active (the loaded-session cap hibernates the least recently active
// quiet session first) and the process's request that it hibernate. It is
// safe for concurrent use; Session.Activity returns the session's.
type Activity struct {
	last atomic.Int64  // Unix nanoseconds of the last activity
	ask  chan struct{} // the process asks the session to hibernate
}

func newActivity() *Activity { return &Activity{ask: make(chan struct{}, 1)} }

// Touch records activity now.
func (a *Activity) Touch() { a.last.Store(time.Now().UnixNano()) }

// Last is when the session was last active (Touch), in Unix nanoseconds.
func (a *Activity) Last() int64 { return a.last.Load() }

// AskHibernate asks the session to hibernate if it is quiet (the
// loaded-session cap); it does not wait.
func (a *Activity) AskHibernate() {
	select {
	case a.ask <- struct{}{}:
	default:
	}
}

// idleFor is how long the session has had no activity.
func (a *Activity) idleFor() time.Duration {
	return time.Since(time.Unix(0, a.last.Load()))
}

// Activity is the session's activity (safe for concurrent use).
func (s *Session) Activity() *Activity { return s.act }

// quiet reports whether the session may hibernate now: no step running, no
// command read but not handled, nothing queued or in flight in the machine.
// Waiting for input, an authorization, a background task's result, or a
// resume is allowed: each of those arrives as an inbox command, and a
// command wakes the session.
func (s *Session) quiet() bool {
	if s.stopped || s.cancel != nil || len(s.cur.deliveries()) > 0 || len(s.steps) > 0 || s.senders.len() > 0 {
		return false
	}
	switch s.m.IdleReason() {
	case "", runtime.SkipInput, runtime.SkipAuthorization, runtime.SkipTask, runtime.SkipPaused:
		return true
	}
	return false
}

// maybeExpire ends the session with reason idle_expired (runtime.IdleExpire)
// once it had no command or step for EndIdleAfter, while it is idle — no
// wait, no pause, nothing queued — and its inbox holds nothing it has not
// received (backlogged): a command on its way counts as activity. A
// draining process leaves it to the next owner.
func (s *Session) maybeExpire(ctx context.Context) error {
	after := s.env.EndIdleAfter
	if after <= 0 || s.stopped || s.m.Ended() != "" || s.env.Process.Draining() || s.now().Sub(s.idleSince) < after {
		return nil
	}
	if !s.quiet() || s.m.IdleReason() != "" || s.backlogged(ctx) {
		return nil
	}
	idle := s.now().Sub(s.idleSince).Round(time.Millisecond)
	if err := s.handle(ctx, runtime.IdleExpire{}); err != nil || s.m.Ended() != runtime.EndIdleExpired {
		return err
	}
	s.log.Info("session idle expired", "idle", idle, "limit", after)
	s.env.Observer.IdleExpired()
	return nil
}

// maybeHibernate hibernates the session when it is quiet and either idle for
// HibernateAfter or asked to by the loaded-session cap (force).
func (s *Session) maybeHibernate(ctx context.Context, force bool) error {
	if s.env.Process.Draining() {
		if !s.drainable() {
			return nil
		}
		if sent, err := s.clearSends(ctx); sent || err != nil {
			return err
		}
		return s.hibernate(ctx)
	}
	after := s.env.HibernateAfter
	if force {
		// Even under the cap a session stays a moment: one just loaded
		// looks quiet until its consumer delivers the command that woke it.
		after = minResident
	}
	if after <= 0 || s.act.idleFor() < after {
		return nil
	}
	if !s.quiet() || s.backlogged(ctx) {
		return nil
	}
	if sent, err := s.clearSends(ctx); sent || err != nil {
		return err // hibernates at the next check
	}
	return s.hibernate(ctx)
}

// clearSends commits the checkpoint without the last commit's sends (they
// left) before the session hibernates: a hibernated session is booted by
// every wake, and each boot would send them again — and wake the
// receiver, whose boot would do the same.
func (s *Session) clearSends(ctx context.Context) (bool, error) {
	if len(s.m.Snapshot().Sends) == 0 {
		return false, nil
	}
	return true, s.handle(ctx, runtime.SendsDone{})
}

// backlogged reports whether the inbox holds a command the cursor has not
// delivered yet, by leader reads: neither applied nor received (the
// machine's queue holds commands received while paused or waiting, which
// do not stop a hibernation: they stay in the inbox). Such a session — one
// just loaded by a wake, whose consumer is slow on a loaded machine — is
// not quiet, whatever its machine says: hibernated, the re-check would load
// it again, and under the loaded-session cap it could be evicted again
// before its cursor delivered, for ever. Its idle clock restarts, so the
// next attempt waits a whole period; a failed read also keeps it loaded.
func (s *Session) backlogged(ctx context.Context) bool {
	applied := s.m.Snapshot().Applied
	queued := map[uint64]bool{}
	for _, c := range s.m.Queued() {
		queued[c.Seq] = true
	}
	from := applied.Next
	if from > 0 {
		from--
	}
	for range len(queued) + len(applied.Above) + 1 {
		seq, err := s.env.Backlog.After(ctx, s.cur.tokens, from)
		switch {
		case err != nil:
			if ctx.Err() == nil {
				s.log.Debug("backlog read before hibernating failed; staying loaded", "err", err)
			}
			s.act.Touch()
			return true
		case seq == 0:
			return false
		case !applied.Has(seq) && !queued[seq]:
			s.act.Touch()
			return true
		}
		from = seq
	}
	return false
}

// minResident is how long a session stays loaded, idle, before the
// loaded-session cap may hibernate it.
const minResident = 200 * time.Millisecond

// hibernate CASes the record to hibernated, deletes the consumer and drops
// the index entry; the session then stops. The caller (spawn) re-checks the
// inbox with a leader read once the session has left memory, and loads it
// again if a command slipped in (see recheckHibernated).
func (s *Session) hibernate(ctx context.Context) error {
	if err := s.pub.await(); err != nil {
		return err
	}
	s.cur.flushPurge(ctx, s.env.Process.LeaseValid(), s.log) // best effort: processed commands off the inbox
	rec, err := record.Hibernate(s.rec, s.rec.Ownership())
	if err != nil {
		return err
	}
	rec.UpdatedAt = s.now()
	rev, err := s.env.Records.UpdateSession(ctx, rec, s.rev)
	if err != nil && !errors.Is(err, record.ErrConflict) && ctx.Err() == nil {
		rev, err = s.settleHibernate(ctx, rec, err)
	}
	switch {
	case errors.Is(err, record.ErrConflict):
		s.env.Observer.Conflict("hibernate")
		s.log.Warn("hibernation lost the CAS: ownership moved on, stopping", "rev", s.rev)
		s.stopped = true
		return nil
	case err != nil:
		if ctx.Err() != nil {
			return nil
		}
		s.log.Warn("hibernation not written; staying loaded", "err", err)
		return nil
	}
	s.rec, s.rev = rec, rev
	s.env.Failpoints.Run(failpoint.Hibernating, failpoint.Args{SessionID: s.id, Detail: "cas"})
	s.cur.close()
	if err := s.env.Inbox.Delete(ctx, s.cur.name); err != nil {
		// The consumer expires by its inactivity threshold.
		s.log.Debug("delete consumer of hibernated session", "err", err)
	}
	if err := s.env.Process.RemoveIndex(ctx, s.id); err != nil && !errors.Is(err, record.ErrNotFound) {
		s.log.Debug("remove index entry of hibernated session", "err", err)
	}
	s.env.Failpoints.Run(failpoint.Hibernating, failpoint.Args{SessionID: s.id, Detail: "consumer"})
	s.indexState(rec, rev) // last: the session has left the process's index
	s.stopped = true
	s.hibernated.Store(true)
	s.env.Observer.Hibernated()
	s.log.Debug("session hibernated", "idle", s.act.idleFor().Round(time.Millisecond))
	return nil
}

// settleHibernate resolves a hibernation CAS whose reply was lost by a
// leader read: the record carrying this write means it landed; an unchanged
// revision means it did not; anything else lost ownership.
func (s *Session) settleHibernate(ctx context.Context, rec record.SessionRecord, cause error) (uint64, error) {
	cur, err := s.env.Records.LeaderSession(ctx, s.id)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%w (settling: %v)", cause, err)
	case cur.Record.Writer == rec.Writer && cur.Record.WriteCounter == rec.WriteCounter && cur.Record.State == record.StateHibernated:
		return cur.Revision, nil
	case cur.Revision == s.rev:
		return 0, cause
	}
	return 0, record.ErrConflict
}

// Recheck closes the hibernate/publish race, once a hibernated session is
// out of the process's loaded set: a command published before it left
// memory may have reached neither the cursor (now deleted) nor a wake
// (answered "running"). A leader read of its inbox subjects finds any
// unprocessed command: Recheck reports whether the session must be loaded
// again (true also when the read failed: a loaded quiet session hibernates
// again). A wake arriving after the session left memory finds the record
// hibernated and loads it anyway.
func (s *Session) Recheck(ctx context.Context) (bool, error) {
	s.env.Failpoints.Run(failpoint.Hibernating, failpoint.Args{SessionID: s.id, Detail: "left"})
	seq, err := Unprocessed(ctx, s.env.Backlog, s.cur.tokens, s.m.Snapshot().Applied)
	return err != nil || seq > 0, err
}

// drainable: while draining, a session hibernates as soon as no step runs,
// even with commands queued or a turn open (they stay unprocessed in the
// inbox, and the checkpoint resumes the turn on the next owner) — but not
// while a child send is pending: nothing would wake a hibernated session
// to retry it or to fail it. Such a session stays until its send leaves
// or fails (within the child-send timeout), or the drain times out and a
// peer (or the restarted process) recovers it from the checkpoint.
func (s *Session) drainable() bool {
	return !s.stopped && s.cancel == nil && len(s.steps) == 0 && s.senders.len() == 0
}

// Unprocessed returns the lowest inbox sequence on tokens that applied has
// not processed, by leader reads of backlog, or 0 when there is none.
func Unprocessed(ctx context.Context, backlog Backlog, tokens []string, applied runtime.Applied) (uint64, error) {
	from := applied.Next
	if from > 0 {
		from--
	}
	for {
		seq, err := backlog.After(ctx, tokens, from)
		if err != nil || seq == 0 {
			return 0, err
		}
		if !applied.Has(seq) {
			return seq, nil
		}
		from = seq
	}
}
