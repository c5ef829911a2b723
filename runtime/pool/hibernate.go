package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Hibernation (docs/runtime.md, docs/driver.md "Hibernation"): a quiet session
// leaves memory and deletes its consumer, so an owner process holds only its
// active sessions. The record says `hibernated`; any owner process of the
// deployment loads it again on a wake.

// touch records activity: hibernation picks the least recently active.
func (s *session) touch() { s.active.Store(time.Now().UnixNano()) }

// idleFor is how long the session has had no activity.
func (s *session) idleFor() time.Duration {
	return time.Since(time.Unix(0, s.active.Load()))
}

// quiet reports whether the session may hibernate now: no step running, no
// command read but not handled, nothing queued or in flight in the machine.
// Waiting for input, an authorization, a background task's result, or a
// resume is allowed: each of those arrives as an inbox command, and a
// command wakes the session.
func (s *session) quiet() bool {
	if s.stopped || s.cancel != nil || len(s.cmds) > 0 || len(s.steps) > 0 {
		return false
	}
	switch s.m.IdleReason() {
	case "", runtime.SkipInput, runtime.SkipAuthorization, runtime.SkipTask, runtime.SkipPaused:
		return true
	}
	return false
}

// maybeHibernate hibernates the session when it is quiet and either idle for
// HibernateAfter or asked to by the loaded-session cap (force).
func (s *session) maybeHibernate(ctx context.Context, force bool) error {
	if s.o.draining.Load() {
		if !s.drainable() {
			return nil
		}
		return s.hibernate(ctx)
	}
	after := s.o.cfg.HibernateAfter
	if force {
		// Even under the cap a session stays a moment: one just loaded
		// looks quiet until its consumer delivers the command that woke it.
		after = minResident
	}
	if after <= 0 || s.idleFor() < after {
		return nil
	}
	if !s.quiet() {
		return nil
	}
	return s.hibernate(ctx)
}

// minResident is how long a session stays loaded, idle, before the
// loaded-session cap may hibernate it.
const minResident = 200 * time.Millisecond

// hibernate CASes the record to hibernated, deletes the consumer and drops
// the index entry; the session then stops. The caller (spawn) re-checks the
// inbox with a leader read once the session has left memory, and loads it
// again if a command slipped in (see recheckHibernated).
func (s *session) hibernate(ctx context.Context) error {
	if err := s.awaitPublish(); err != nil {
		return err
	}
	s.flushPurge(ctx) // best effort: processed commands off the inbox
	rec, err := record.Hibernate(s.rec, s.rec.Ownership())
	if err != nil {
		return err
	}
	rec.UpdatedAt = s.o.now()
	rev, err := s.o.cfg.Store.UpdateSession(ctx, rec, s.rev)
	if err != nil && !errors.Is(err, record.ErrConflict) && ctx.Err() == nil {
		rev, err = s.settleHibernate(ctx, rec, err)
	}
	switch {
	case errors.Is(err, record.ErrConflict):
		s.o.metrics.conflicts.WithLabelValues("hibernate").Inc()
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
	s.o.faults.hibernating(s.id, "cas")
	if err := s.inbox.remove(ctx); err != nil {
		// The consumer expires by its inactivity threshold.
		s.log.Debug("delete consumer of hibernated session", "err", err)
	}
	if err := s.o.cfg.Store.RemoveIndex(ctx, s.o.cfg.ProcessID, s.id); err != nil && !errors.Is(err, record.ErrNotFound) {
		s.log.Debug("remove index entry of hibernated session", "err", err)
	}
	s.o.faults.hibernating(s.id, "consumer")
	s.stopped, s.hibernated = true, true
	s.o.metrics.hibernated()
	s.log.Debug("session hibernated", "idle", s.idleFor().Round(time.Millisecond))
	return nil
}

// settleHibernate resolves a hibernation CAS whose reply was lost by a
// leader read: the record carrying this write means it landed; an unchanged
// revision means it did not; anything else lost ownership.
func (s *session) settleHibernate(ctx context.Context, rec record.SessionRecord, cause error) (uint64, error) {
	cur, err := s.o.cfg.Store.LeaderSession(ctx, s.id)
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

// recheckHibernated closes the hibernate/publish race: a command published
// before the session left memory may have reached neither the consumer (now
// deleted) nor a wake (answered "running"). After the session is out of the
// loaded set, a leader read of its inbox subjects finds any unprocessed
// command, and the session is loaded again here. A wake arriving after the
// session left memory finds the record hibernated and loads it anyway.
func (o *Owner) recheckHibernated(ctx context.Context, s *session) {
	o.faults.hibernating(s.id, "left")
	applied := s.m.Snapshot().Applied
	seq, err := o.unprocessed(ctx, s.tokens, applied)
	if err != nil {
		// Unknown: load it, a loaded quiet session hibernates again.
		s.log.Warn("re-check after hibernation failed; loading again", "err", err)
	}
	if err == nil && seq == 0 {
		return
	}
	if o.draining.Load() {
		// Not here: a peer of the pool loads it.
		o.sendWake(o.cfg.Deployment, protocol.WakeRequest{SessionID: s.id, Source: protocol.WakeSelf})
		return
	}
	if rep := o.Wake(ctx, protocol.WakeRequest{SessionID: s.id, Source: protocol.WakeSelf}); rep.Error != nil {
		s.log.Warn("wake after hibernation failed; the sweeper retries", "err", rep.Error.Message)
	}
}

// unprocessed returns the lowest inbox sequence on tokens that applied has
// not processed, by leader reads, or 0 when there is none.
func (o *Owner) unprocessed(ctx context.Context, tokens []string, applied runtime.Applied) (uint64, error) {
	from := applied.Next
	if from > 0 {
		from--
	}
	for {
		seq, err := o.backlog.After(ctx, tokens, from)
		if err != nil || seq == 0 {
			return 0, err
		}
		if !applied.Has(seq) {
			return seq, nil
		}
		from = seq
	}
}

// ErrAtCapacity reports that this owner process holds its maximum of loaded
// sessions and none could hibernate in time.
var ErrAtCapacity = errors.New("driver: owner process at its loaded-session capacity")

// capacityWait bounds how long a load waits for a quiet session to make room.
const capacityWait = 3 * time.Second

// reserve is beginLoad under the loaded-session cap (Config.MaxLoaded):
// when the process is full, the least recently active quiet sessions are
// asked to hibernate and reserve waits for room. Loaded sessions plus
// claims in progress never exceed the cap, and so neither do this process's
// consumers.
func (o *Owner) reserve(ctx context.Context, id string) (bool, error) {
	deadline := time.NewTimer(capacityWait)
	defer deadline.Stop()
	for {
		if o.draining.Load() {
			return false, ErrDraining
		}
		o.mu.Lock()
		if _, ok := o.sessions[id]; ok || o.loading[id] {
			o.mu.Unlock()
			return false, nil
		}
		over := o.cfg.MaxLoaded > 0 && len(o.sessions)+len(o.loading) >= o.cfg.MaxLoaded
		if !over {
			o.loading[id] = true
			o.mu.Unlock()
			return true, nil
		}
		room := o.room
		victims := o.leastActive(len(o.sessions) + len(o.loading) - o.cfg.MaxLoaded + 1)
		o.mu.Unlock()
		for _, l := range victims {
			l.askHibernate()
		}
		select {
		case <-room:
		case <-deadline.C:
			return false, ErrAtCapacity
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// freed wakes reservations waiting for room; callers hold o.mu.
func (o *Owner) freed() {
	close(o.room)
	o.room = make(chan struct{})
}

// leastActive returns up to n loaded sessions, least recently active first.
// Callers hold o.mu.
func (o *Owner) leastActive(n int) []*loaded {
	all := make([]*loaded, 0, len(o.sessions))
	for _, l := range o.sessions {
		if l.s != nil {
			all = append(all, l)
		}
	}
	slices.SortFunc(all, func(a, b *loaded) int { return cmp.Compare(a.s.active.Load(), b.s.active.Load()) })
	return all[:min(n, len(all))]
}

// askHibernate asks a loaded session to hibernate if it is quiet.
func (l *loaded) askHibernate() {
	select {
	case l.s.hib <- struct{}{}:
	default:
	}
}

// inboxSweepLoop runs the inbox sweeper every InboxSweepInterval (±10 %).
func (o *Owner) inboxSweepLoop(ctx context.Context) {
	jittered(ctx, o.cfg.InboxSweepInterval, func() {
		if woken, err := o.sweepInbox(ctx); err != nil {
			o.log.Debug("inbox sweep", "err", err)
		} else if len(woken) > 0 {
			o.log.Info("inbox sweep woke hibernated sessions", "sessions", len(woken))
		}
	})
}

// sweepInbox lists the inbox subjects that hold messages (processed
// commands are purged, so these are few), resolves each token to its
// session, and wakes every hibernated session of this deployment with an
// unprocessed command. It is how a lost wake and a server-fired timer reach
// a hibernated session. It returns the sessions it woke.
func (o *Owner) sweepInbox(ctx context.Context) ([]string, error) {
	stream, err := o.cfg.JS.Stream(ctx, o.cfg.Names.InboxStream())
	if err != nil {
		return nil, err
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(o.cfg.Names.InboxAll()))
	if err != nil {
		return nil, err
	}
	prefix := o.cfg.Names.Inbox("")
	woken := map[string]bool{}
	var wake []string
	for subj := range info.State.Subjects {
		tok := strings.TrimPrefix(subj, prefix)
		h, _, err := o.cfg.Store.GetHook(ctx, tok)
		if err != nil || h.Tombstone || woken[h.SessionID] || o.isLoaded(h.SessionID) {
			continue
		}
		// Per token: a session's command may be on any of its addresses.
		if o.hibernatedWithWork(ctx, h.SessionID, tok) {
			woken[h.SessionID] = true
			wake = append(wake, h.SessionID)
		}
	}
	o.metrics.found("inbox", len(wake))
	// To the pool's queue group, so the loads spread over its processes;
	// a few at a time, each waiting for its reply (back-pressure).
	eachBounded(ctx, wake, sweepWakes, func(id string) {
		if rep, err := o.requestWake(ctx, protocol.WakeRequest{SessionID: id, Source: protocol.WakeSweeper}); err != nil || rep.Error != nil {
			o.log.Debug("inbox sweep: wake", "session", id, "err", err, "reply", rep.Error)
		}
	})
	return wake, nil
}

// sweepWakes bounds the wake requests one inbox sweep has in flight.
const sweepWakes = 16

// hibernatedWithWork reports whether session id is hibernated on this
// deployment (or adoptable by it) with an unprocessed command on token; a
// quarantined session never is, its commands wait in the inbox. The record is a direct
// get (a hint): the wake decides by a leader read and a CAS.
func (o *Owner) hibernatedWithWork(ctx context.Context, id, tok string) bool {
	cur, err := o.cfg.Store.GetSession(ctx, id)
	if err != nil {
		return false
	}
	rec := cur.Record
	ours := rec.State == record.StateHibernated && rec.DeploymentID == o.cfg.Deployment &&
		(rec.Retry == nil || rec.Retry.DeploymentID == o.cfg.Deployment)
	if !ours && !o.adoptable(ctx, rec) {
		return false
	}
	cp, err := wire.DecodeCheckpoint(cur.Record.Checkpoint)
	if err != nil {
		return true // unreadable here: let a load report it
	}
	seq, err := o.unprocessed(ctx, []string{tok}, runtime.Applied{Next: max(cp.Applied.Low, 1), Above: cp.Applied.Above})
	return err != nil || seq > 0
}
