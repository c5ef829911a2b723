package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
)

// session is one loaded session: its machine, its record revision, its
// consumer and its event appender. Only its own goroutine touches it.
type session struct {
	o       *Owner
	id      string
	runID   string
	log     *slog.Logger
	m       *runtime.Machine
	rec     record.SessionRecord
	rev     uint64
	tokens  []string // encoded tokens: stable first, then aliases
	inbox   *inbox
	app     *kv.Appender
	outbox  []wire.Event // events of the last commit, stamped
	cmds    chan runtime.Command
	steps   chan runtime.StepDone
	cancel  context.CancelFunc // cancels the running step
	purgeAt uint64             // lowest unapplied sequence to purge below
	purged  uint64
	prev    string     // the predecessor's consumer, deleted after boot
	hist    *history   // sealed history segments
	pubWait chan error // the event append in flight, if any

	arrival       *runtime.HandoffInfo // the handoff that activated this run (BootHandoff)
	adoption      *runtime.AdoptInfo   // the adoption that claimed it (BootAdopt)
	stateRef      *wire.BlobRef        // the state blob of the last commit (nil: inline)
	nextStateRef  *wire.BlobRef        // the state blob of the commit in flight
	pendingRec    record.SessionRecord // the record of an uncertain commit
	pendingOutbox []wire.Event
	pendingDue    string
	due           string // the step due as of the last commit (dueStep)
	stopped       bool
	hibernated    bool          // stopped by hibernating
	active        atomic.Int64  // unix nanoseconds of the last activity (touch)
	hib           chan struct{} // the loaded-session cap asks it to hibernate
}

// newSession prepares a claimed session; rec/rev are the record as claimed.
func (o *Owner) newSession(rec record.SessionRecord, rev uint64, snap runtime.Snapshot, tokens []string, timeout time.Duration) (*session, error) {
	m, err := runtime.NewMachine(runtime.Config{
		SessionID: rec.SessionID, RunID: rec.OwnerRunID, Deployment: o.cfg.Deployment,
		Timeout: timeout, EventKinds: o.cfg.Agent.EventKinds(), RecentIDs: wire.MaxAppliedIDs,
	}, snap)
	if err != nil {
		return nil, err
	}
	s := &session{
		o: o, id: rec.SessionID, runID: rec.OwnerRunID, m: m, rec: rec, rev: rev, tokens: tokens,
		log:   o.log.With(slog.String("session", rec.SessionID), slog.Uint64("epoch", rec.Epoch)),
		cmds:  make(chan runtime.Command, 64),
		steps: make(chan runtime.StepDone, 1),
		hib:   make(chan struct{}, 1),
		app:   kv.NewAppender(o.cfg.JS, o.events, o.cfg.Names.Events(rec.SessionID), rec.SessionID),
	}
	s.hist, s.due = o.newHistory(), dueStep(snap)
	s.inbox = &inbox{js: o.cfg.JS, names: o.cfg.Names, name: rec.Consumer, tokens: tokens, lag: o.metrics.inboxLag}
	return s, nil
}

// run boots the machine and serves it until the session stops or ctx ends.
func (s *session) run(ctx context.Context, reason runtime.BootReason) error {
	defer s.shutdown()
	if !s.o.leaseValid() {
		return ErrFenced
	}
	if err := s.inbox.openFresh(ctx, s.m.Snapshot().Applied.Next, s.cmds); err != nil {
		return err
	}
	if err := s.o.faults.afterConsumer(s.id, reason); err != nil {
		return err
	}
	// Off the path to the first step: the predecessor's consumer is only a
	// cursor (its reader stopped before the handoff or died with its
	// process), and it expires by its inactivity threshold if this fails.
	// It runs in the serving context, so a run that ends at once (handed on
	// again) does not abandon it.
	if prev := s.prev; prev != "" && prev != s.inbox.name {
		sctx := s.o.servingCtx()
		s.o.goBG(sctx, func() { s.deletePredecessor(sctx, prev) })
	}
	bootOutbox := s.outbox
	if err := s.handle(ctx, runtime.Boot{Now: s.o.now(), Reason: reason, Handoff: s.arrival, Adopt: s.adoption}); err != nil {
		return err
	}
	if err := s.restartTasks(ctx, bootOutbox); err != nil {
		return err
	}
	return s.loop(ctx)
}

func (s *session) loop(ctx context.Context) error {
	tick := time.NewTicker(s.o.cfg.TickInterval)
	defer tick.Stop()
	reconn := s.o.reconnected()
	checkConsumer := false
	for !s.stopped {
		var err error
		select {
		case <-ctx.Done():
			return nil
		case c := <-s.cmds:
			s.touch()
			err = s.handle(ctx, runtime.Received{Cmd: c})
		case d := <-s.steps:
			s.cancel = nil
			s.touch()
			err = s.handle(ctx, d)
		case <-s.hib:
			err = s.maybeHibernate(ctx, true)
		case cause := <-s.inbox.lost:
			err = s.recoverConsumer(ctx, cause)
		case <-reconn:
			// The server may have restarted: memory-storage consumers are
			// gone then, and the iterator would only notice after missed
			// heartbeats. Check on the next ticks.
			reconn, checkConsumer = s.o.reconnected(), true
		case now := <-tick.C:
			err = s.handle(ctx, runtime.Tick{Now: now})
			if err == nil && checkConsumer {
				checkConsumer, err = s.verifyConsumer(ctx)
			}
			s.flushPurge(ctx)
			if err == nil {
				err = s.maybeHibernate(ctx, false)
			}
		}
		if err == nil && s.o.draining.Load() && !s.stopped {
			err = s.maybeHibernate(ctx, true) // right after a step finished
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// handle feeds one input and performs the resulting effects, feeding back
// the results of synchronous effects until nothing is left.
func (s *session) handle(ctx context.Context, in runtime.Input) error {
	pending := []runtime.Input{in}
	for len(pending) > 0 && !s.stopped {
		in, pending = pending[0], pending[1:]
		effects, err := s.m.Handle(in)
		if errors.Is(err, runtime.ErrEnded) {
			continue // a command after the end: already cleaned up
		}
		if err != nil {
			return fmt.Errorf("driver: session %s: %w", s.id, err)
		}
		for _, e := range effects {
			next, err := s.perform(ctx, e)
			if err != nil {
				return err
			}
			pending = append(pending, next...)
		}
		s.stopped = s.stopped || s.m.Stopped()
	}
	return nil
}

// shutdown stops delivery and a running step. The consumer stays for a
// successor run of this process or expires by its inactivity threshold.
func (s *session) shutdown() {
	if s.cancel != nil {
		s.cancel()
	}
	_ = s.awaitPublish()
	s.inbox.close()
}

func (s *session) deletePredecessor(ctx context.Context, prev string) {
	if err := s.o.cfg.JS.DeleteConsumer(ctx, s.o.cfg.Names.InboxStream(), prev); err == nil {
		s.log.Debug("deleted predecessor consumer", "consumer", prev)
	}
}

// encodedTokens returns the stable token plus the encoded aliases.
func encodedTokens(sessionID string, aliases []string) ([]string, error) {
	toks := []string{subjects.StableToken(sessionID)}
	for _, a := range aliases {
		t, err := subjects.EncodeToken(a)
		if err != nil {
			return nil, err
		}
		toks = append(toks, t)
	}
	return toks, nil
}

// verifyConsumer checks, after a reconnect, that the session's consumer
// still exists and recreates it if not. It reports whether to check again
// (the server did not answer yet).
func (s *session) verifyConsumer(ctx context.Context) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_, err := s.o.cfg.JS.Consumer(cctx, s.o.cfg.Names.InboxStream(), s.inbox.name)
	cancel()
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return false, s.recoverConsumer(ctx, err)
	}
	return ctx.Err() == nil, nil
}

// recoverConsumer handles a consumer that ended unexpectedly (deleted by a
// successor, lost in a server restart, an iterator error): only while a
// leader read shows the record still names this run and epoch is the
// consumer recreated, at the lowest unapplied sequence. Otherwise the
// session was taken over: it stops without side effects.
func (s *session) recoverConsumer(ctx context.Context, cause error) error {
	s.log.Warn("inbox consumer lost; checking ownership", "consumer", s.inbox.name, "err", cause)
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(50*time.Millisecond), backoff.WithMaxInterval(time.Second),
		backoff.WithMaxElapsedTime(0)), ctx)
	err := backoff.Retry(func() error {
		if !s.o.leaseValid() {
			return backoff.Permanent(ErrFenced)
		}
		cur, err := s.o.cfg.Store.LeaderSession(ctx, s.id)
		if err != nil {
			return err
		}
		if cur.Record.OwnerRunID != s.runID || cur.Record.Epoch != s.rec.Epoch {
			s.log.Warn("session taken over by another run; stopping without side effects",
				"owner", cur.Record.OwnerProcess, "run", cur.Record.OwnerRunID, "new_epoch", cur.Record.Epoch)
			s.stopped = true
			return nil
		}
		if err := s.reopen(ctx); err != nil {
			return err
		}
		s.log.Info("inbox consumer recreated at the lowest unapplied sequence", "consumer", s.inbox.name, "start", s.m.Snapshot().Applied.Next)
		return nil
	}, b)
	if ctx.Err() != nil && !errors.Is(err, ErrFenced) {
		return nil
	}
	return err
}
