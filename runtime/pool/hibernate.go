package pool

import (
	"context"
	"hash/fnv"
	"strings"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Hibernation (docs/runtime.md, docs/driver.md "Hibernation"): a quiet session
// leaves memory and deletes its consumer, so an owner process holds only its
// active sessions. The record says `hibernated`; any owner process of the
// deployment loads it again on a wake.

// recheckHibernated re-checks a session that hibernated, once it is out
// of the loaded set (session.Recheck), and loads it again when a command
// slipped in: here, or, while draining, on a peer of the pool.
func (o *Owner) recheckHibernated(ctx context.Context, s *session.Session) {
	again, err := s.Recheck(ctx)
	if err != nil {
		// Unknown: load it, a loaded quiet session hibernates again.
		o.log.Warn("re-check after hibernation failed; loading again", "session", s.ID(), "err", err)
	}
	if !again {
		return
	}
	if o.draining.Load() {
		// Not here: a peer of the pool loads it.
		o.wakes.sendWake(o.cfg.Deployment, protocol.WakeRequest{SessionID: s.ID(), Source: protocol.WakeSelf})
		return
	}
	if rep := o.Wake(ctx, protocol.WakeRequest{SessionID: s.ID(), Source: protocol.WakeSelf}); rep.Error != nil {
		o.log.Warn("wake after hibernation failed; the sweeper retries", "session", s.ID(), "err", rep.Error.Message)
	}
}

// inboxSweepLoop runs the inbox sweeper every InboxSweepInterval (±10 %).
func (o *sweeper) inboxSweepLoop(ctx context.Context) {
	jittered(ctx, o.cfg.InboxSweepInterval, func() {
		if woken, err := o.sweepInbox(ctx); err != nil {
			o.log.Debug("inbox sweep", "err", err)
		} else if len(woken) > 0 {
			o.log.Info("inbox sweep woke hibernated sessions", "sessions", len(woken))
		}
	})
}

// sweepInbox lists the inbox subjects that hold messages (processed
// commands are purged, so these are few), resolves each token of this
// process's share of them (inShard) to its session, and wakes every
// hibernated session of this deployment with an unprocessed command. It is
// how a lost wake and a server-fired timer reach a hibernated session. It
// returns the sessions it woke.
//
// The share follows the lease watch's live processes of the deployment:
// while views differ (a process joined, or died and its lease has not
// expired yet) a subject may be read twice or wait a round, never longer
// than until the views agree.
func (o *sweeper) sweepInbox(ctx context.Context) ([]string, error) {
	stream, err := o.cfg.JS.Stream(ctx, o.cfg.Names.InboxStream())
	if err != nil {
		return nil, err
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(o.cfg.Names.InboxAll()))
	if err != nil {
		return nil, err
	}
	prefix := o.cfg.Names.Inbox("")
	rank, n := o.peers.shard(o.cfg.Deployment, o.cfg.ProcessID)
	woken := map[string]bool{}
	var wake []string
	for subj := range info.State.Subjects {
		tok := strings.TrimPrefix(subj, prefix)
		if !inShard(tok, rank, n) {
			continue // a peer's share
		}
		h, _, err := o.cfg.Store.GetHook(ctx, tok)
		if err != nil || h.Tombstone || woken[h.SessionID] || o.reg.isLoaded(h.SessionID) {
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
		if rep, err := o.wakes.requestWake(ctx, protocol.WakeRequest{SessionID: id, Source: protocol.WakeSweeper}); err != nil || rep.Error != nil {
			o.log.Debug("inbox sweep: wake", "session", id, "err", err, "reply", rep.Error)
		}
	})
	return wake, nil
}

// inShard reports whether token tok is in share rank of n: the pool's
// inbox sweepers split the listed subjects by a hash of the token, so each
// subject's hook and record are read by one process per round, not by
// every process of the pool.
func inShard(tok string, rank, n int) bool {
	if n <= 1 {
		return true
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(tok))
	return int(h.Sum32()%uint32(n)) == rank
}

// sweepWakes bounds the wake requests one inbox sweep has in flight.
const sweepWakes = 16

// hibernatedWithWork reports whether session id is hibernated on this
// deployment (or adoptable by it) with an unprocessed command on token; a
// quarantined session never is, its commands wait in the inbox. The record is a direct
// get (a hint): the wake decides by a leader read and a CAS.
func (o *sweeper) hibernatedWithWork(ctx context.Context, id, tok string) bool {
	cur, err := o.cfg.Store.GetSession(ctx, id)
	if err != nil {
		return false
	}
	rec := cur.Record
	ours := rec.State == record.StateHibernated && rec.DeploymentID == o.cfg.Deployment &&
		(rec.Retry == nil || rec.Retry.DeploymentID == o.cfg.Deployment)
	if !ours && !o.retire.adoptable(rec) {
		return false
	}
	cp, err := wire.DecodeCheckpoint(cur.Record.Checkpoint)
	if err != nil {
		return true // unreadable here: let a load report it
	}
	seq, err := session.Unprocessed(ctx, o.backlog, []string{tok}, runtime.Applied{Next: max(cp.Applied.Low, 1), Above: cp.Applied.Above})
	return err != nil || seq > 0
}
