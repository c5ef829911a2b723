package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/internal/failpoint"
	"github.com/baton-rt/baton/internal/stages"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/cenkalti/backoff/v4"
)

// Session is one loaded session: its machine, its record revision, its
// inbox cursor and its event publisher. Only its own goroutine touches it
// (Run); Activity (Touch, Last, AskHibernate) and the read-only accessors
// may be called from any goroutine.
type Session struct {
	env    *Env
	id     string
	runID  string
	log    *slog.Logger
	m      *runtime.Machine
	rec    record.SessionRecord
	rev    uint64
	cur    cursor // the session's cursor over its inbox
	pub    publisher
	steps  chan runtime.StepDone
	cancel context.CancelFunc     // cancels the running step
	prev   string                 // the predecessor's cursor, deleted after boot
	hist   *history               // sealed history segments
	enc    wire.CheckpointEncoder // its checkpoints, the inline history's entries from cache

	arrival       *runtime.HandoffInfo // the handoff that activated this run (BootHandoff)
	adoption      *runtime.AdoptInfo   // the adoption that claimed it (BootAdopt)
	pendingRec    record.SessionRecord // the record of an uncertain commit
	pendingOutbox []wire.Event
	pendingDue    string
	due           string              // the step due as of the last commit (dueStep)
	bootDue       string              // the step in flight at boot: a re-run (cleared at its start)
	bootTurn      string              // the turn and step in flight at the claim ("": none), whose
	bootStep      int                 // journal's blobs collectOrphans keeps
	orphans       bool                // collect what a crash left before the first commit (Boot.Orphans)
	refs          blobRefs            // the blobs the last commit (or the claimed checkpoint) refers to
	nextRefs      blobRefs            // the blobs of the commit in flight
	journals      map[string]*journal // by step key: journals to remove once their step is folded
	stopped       bool
	hibernated    atomic.Bool // stopped by hibernating
	act           *Activity   // last activity; the loaded-session cap's request to hibernate
	idleSince     time.Time   // the last command or step (EndIdleAfter), from the boot's IdleSince
	senders       senders     // pending child sends being retried
	ix            indexer     // its entry of the session index
}

// New prepares a claimed session to run (Run); env must be Ready.
func New(env *Env, b Boot) (*Session, error) {
	snap := b.Checkpoint.Snap
	m, err := runtime.NewMachine(runtime.Config{
		SessionID: b.Record.SessionID, RunID: b.Record.OwnerRunID, Deployment: env.Deployment,
		Timeout: b.Timeout, EventKinds: env.Agent.EventKinds(), RecentIDs: wire.MaxAppliedIDs, Limits: env.Limits,
		Retry: env.StepRetry, MaxDebounce: env.MaxDebounce,
	}, snap)
	if err != nil {
		return nil, err
	}
	rec := b.Record
	s := &Session{
		env: env, id: rec.SessionID, runID: rec.OwnerRunID, m: m, rec: rec, rev: b.Revision,
		log:   env.Log.With(slog.String("session", rec.SessionID), slog.Uint64("epoch", rec.Epoch)),
		steps: make(chan runtime.StepDone, 1),
		act:   newActivity(), journals: map[string]*journal{},
		senders: newSenders(),
		pub:     publisher{id: rec.SessionID, app: env.Appender(rec.SessionID), outbox: b.Checkpoint.Outbox},
		cur:     cursor{inbox: env.Inbox, name: rec.Consumer, tokens: b.Tokens},
		prev:    b.Predecessor, arrival: b.Arrival, adoption: b.Adoption, refs: b.Checkpoint.refs,
	}
	if InFlight(snap) {
		s.bootTurn, s.bootStep = snap.Turn.ID, snap.Turn.Steps+1
	}
	s.orphans = b.Orphans
	env.blobs.forget(rec.SessionID)
	s.hist, s.due = b.Checkpoint.hist, dueStep(snap)
	if s.idleSince = b.IdleSince; s.idleSince.IsZero() {
		s.idleSince = s.now()
	}
	s.bootDue = s.due
	if s.hist == nil {
		s.hist = newHistory(env, rec.SessionID)
	}
	return s, nil
}

// ID is the session's ID.
func (s *Session) ID() string { return s.id }

// Epoch is the epoch this run claimed.
func (s *Session) Epoch() uint64 { return s.rec.Epoch }

// RunID is this run's ID (the record's ownerRunId while it owns it).
func (s *Session) RunID() string { return s.runID }

// Held is the record as this run last wrote it (or claimed it), at its
// revision. Call it after Run returned.
func (s *Session) Held() record.Session { return record.Session{Record: s.rec, Revision: s.rev} }

// Hibernated reports whether the run stopped by hibernating.
func (s *Session) Hibernated() bool { return s.hibernated.Load() }

// Ended is the machine's end reason ("" while the session lives). Call it
// after Run returned.
func (s *Session) Ended() string { return s.m.Ended() }

// Run boots the machine and serves it until the session stops (ended,
// hibernated, handed off, fenced, its record moved on) or ctx ends. A nil
// error with Ended and Hibernated unset means the record moved on: another
// run owns the session now.
func (s *Session) Run(ctx context.Context, reason runtime.BootReason) error {
	defer s.shutdown()
	if err := s.env.Process.AwaitLease(ctx); err != nil {
		return err
	}
	// What a crash left in the inventory is collected before this run's
	// first commit stores anything (collectOrphans), overlapping the
	// consumer's creation.
	orphans := make(chan struct{})
	go func() {
		defer close(orphans)
		if s.orphans {
			s.collectOrphans(ctx)
		}
	}()
	defer func() { <-orphans }()
	// The last commit's outbox is re-published before the boot commit (the
	// machine's first Publish; the boot waits for it): start it now, so it
	// overlaps the consumer's creation. The boot's Publish then finds it
	// done (the appender knows the stream's position).
	if out := s.m.Snapshot().Outbox; len(out) > 0 {
		if err := s.pub.publish(ctx, out); err != nil {
			return err
		}
	}
	stages.Mark(s.id, "run.open")
	trigger, opened := s.openWithTrigger(ctx, reason)
	defer func() { _ = opened() }() // a reader opened meanwhile is closed by shutdown
	if trigger == nil {
		if err := s.cursorOpened(opened); err != nil {
			return err
		}
	}
	if err := s.env.Failpoints.Eval(failpoint.AfterConsumer, failpoint.Args{SessionID: s.id, Detail: string(reason)}); err != nil {
		return err
	}
	bootOutbox := s.pub.outbox
	<-orphans
	boot := runtime.Boot{Now: s.now(), Reason: reason, Handoff: s.arrival, Adopt: s.adoption, Commit: true}
	first, firstErr := s.withTrigger(ctx, &boot, trigger)
	if ctx.Err() != nil {
		return nil
	}
	if err := s.handle(ctx, boot); err != nil {
		return err
	}
	if trigger != nil {
		if err := s.cursorOpened(opened); err != nil {
			return err
		}
	}
	if err := s.restartTasks(ctx, bootOutbox); err != nil {
		return err
	}
	if firstErr != nil {
		return firstErr
	}
	if first != nil {
		if err := s.handle(ctx, *first); err != nil {
			return err
		}
	}
	return s.loop(ctx)
}

// openWithTrigger opens the run's cursor; opened waits for it and returns
// the error of its creation. A handoff's successor whose inbox reads one
// message by its sequence (MessageReader) reads its trigger there instead
// of waiting for its new cursor to deliver it, while the cursor is
// created: the boot commit admits the trigger without waiting for the
// consumer's creation and its first pull (the cursor delivers the trigger
// again, a duplicate the machine ignores). The trigger is the session's
// first unapplied command: its source handed off only idle, with every
// command before it in the stream received and applied. A read that fails
// leaves the trigger to the cursor, as for any other run (nil).
func (s *Session) openWithTrigger(ctx context.Context, reason runtime.BootReason) (*Delivery, func() error) {
	start := s.m.Snapshot().Applied.Next
	rd, ok := s.env.Inbox.(MessageReader)
	if !ok || !s.admitsTrigger(reason) {
		err := s.cur.open(ctx, start, true)
		return nil, func() error { return err }
	}
	type result struct {
		r   Reader
		err error
	}
	// The read goes first. The server answers a direct get at once, on the
	// goroutine reading this connection; sent right after the creation's
	// request for a consumer on the same stream, it waited for much of the
	// creation's work (~0.5 ms in the handoff bench on two cores, by
	// stage timestamps); sent before it, it is one short round trip. The
	// boot commit then meets the creation instead (its CAS took ~0.5 ms
	// there, not ~0.25): end to end, the handoff bench did not tell the
	// two orders apart (docs/performance.md, "A handoff's reads outside
	// the API queue").
	d, err := rd.Read(ctx, s.cur.tokens, s.arrival.Trigger.Seq)
	created := make(chan result, 1)
	go func() {
		r, err := s.cur.create(ctx, start, true)
		created <- result{r, err}
	}()
	opened := sync.OnceValue(func() error {
		res := <-created
		if res.err == nil {
			s.cur.adopt(res.r)
		}
		return res.err
	})
	if err != nil {
		s.log.Debug("the handoff's trigger could not be read; the cursor delivers it", "trigger", s.arrival.Trigger.Seq, "err", err)
		return nil, opened
	}
	return &d, opened
}

// cursorOpened waits for the run's cursor, then deletes its predecessor's.
// The deletion is off the path to the first step: the predecessor's cursor
// is only a cursor (its reader stopped before the handoff or died with its
// process), and it expires by its inactivity threshold if this fails. It
// runs in the process's serving context, so a run that ends at once
// (handed on again) does not abandon it.
func (s *Session) cursorOpened(opened func() error) error {
	if err := opened(); err != nil {
		return err
	}
	stages.Mark(s.id, "run.opened")
	if prev := s.prev; prev != "" && prev != s.cur.name {
		s.env.Process.Go(func(ctx context.Context) {
			if err := s.env.Inbox.Delete(ctx, prev); err == nil {
				s.log.Debug("deleted predecessor consumer", "consumer", prev)
			}
		})
	}
	return nil
}

// admitsTrigger reports a handoff's successor that admits its trigger in
// its boot commit (Env.TriggerWait not negative, a marker that named it).
func (s *Session) admitsTrigger(reason runtime.BootReason) bool {
	return reason == runtime.BootHandoff && s.arrival != nil && s.arrival.Trigger.Seq != 0 && s.env.TriggerWait >= 0
}

// withTrigger sets boot.First to a handoff successor's trigger: read, the
// message openWithTrigger read by its sequence, or else what its cursor
// delivers first in time (awaitTrigger). Anything else read there is
// returned, to be received after the boot, where the loop would have
// received it; an error reading it (another agent's deployment could not
// be looked up) is returned to stop the run only after the boot commit,
// as it did in the loop.
func (s *Session) withTrigger(ctx context.Context, boot *runtime.Boot, read *Delivery) (*runtime.Received, error) {
	d, ok := Delivery{}, read != nil
	if ok {
		d = *read
	} else {
		d, ok = s.awaitTrigger(ctx, boot.Reason)
	}
	if !ok {
		return nil, nil
	}
	in, err := s.received(ctx, d)
	switch {
	case err != nil:
		return nil, err
	case in.Cmd.Seq == s.arrival.Trigger.Seq && in.Cmd.ID == s.arrival.Trigger.ID && !s.m.HandsOff(in.Cmd):
		boot.First = &in
		return nil, nil
	}
	return &in, nil
}

// awaitTrigger returns, for a handoff's successor, the first delivery of
// its cursor: normally the trigger, which is in the inbox before the
// handoff begins, so that the boot's commit admits it too (one commit and
// one append of events instead of two, before the trigger's step). It
// waits at most Env.TriggerWait; false: none came, or the run is no
// handoff's successor (or one whose marker did not name its trigger).
func (s *Session) awaitTrigger(ctx context.Context, reason runtime.BootReason) (Delivery, bool) {
	if !s.admitsTrigger(reason) {
		return Delivery{}, false
	}
	wait := time.NewTimer(s.env.TriggerWait)
	defer wait.Stop()
	select {
	case <-ctx.Done():
	case <-wait.C:
		s.log.Debug("the handoff's trigger did not come in time; booting without it", "trigger", s.arrival.Trigger.Seq)
	case d := <-s.cur.deliveries():
		return d, true
	}
	return Delivery{}, false
}

// received is what a delivery from the cursor gives the machine: the
// command decoded, a handoff trigger from another agent's deployment
// marked refused.
func (s *Session) received(ctx context.Context, d Delivery) (runtime.Received, error) {
	stages.Mark(s.id, "loop")
	s.act.Touch()
	s.idleSince = s.now()
	s.env.Observer.InboxLag(time.Since(d.Stored))
	in := wire.DecodeInput(d.Seq, d.Data)
	if err := s.refuseOtherAgents(ctx, &in); err != nil {
		return runtime.Received{}, err
	}
	return runtime.Received{Cmd: in, Now: s.now()}, nil
}

func (s *Session) now() time.Time { return s.env.Now() }

func (s *Session) loop(ctx context.Context) error {
	tick := time.NewTicker(s.env.TickInterval)
	defer tick.Stop()
	reconn := s.env.Process.Reconnected()
	checkCursor := false
	for !s.stopped {
		var err error
		select {
		case <-ctx.Done():
			return nil
		case d := <-s.cur.deliveries():
			var in runtime.Received
			if in, err = s.received(ctx, d); err == nil {
				err = s.handle(ctx, in)
			}
		case d := <-s.steps:
			s.cancel = nil
			s.act.Touch()
			s.idleSince = s.now()
			s.env.Failpoints.Run(failpoint.BeforeCommit, failpoint.Args{SessionID: s.id})
			err = s.handle(ctx, d)
		case <-s.act.ask:
			err = s.maybeHibernate(ctx, true)
		case r := <-s.senders.sent:
			err = s.sendDone(ctx, r)
		case cause := <-s.cur.lost():
			err = s.recoverCursor(ctx, cause)
		case <-reconn:
			// The server may have restarted: memory-storage cursors are
			// gone then, and the reader would only notice after missed
			// heartbeats. Check on the next ticks.
			reconn, checkCursor = s.env.Process.Reconnected(), true
		case now := <-tick.C:
			err = s.handle(ctx, runtime.Tick{Now: now})
			if err == nil && checkCursor {
				checkCursor, err = s.verifyCursor(ctx)
			}
			s.cur.tickPurge(ctx, now, s.env.Process.LeaseValid(), s.log)
			if err == nil {
				err = s.maybeExpire(ctx)
			}
			if err == nil && !s.stopped {
				err = s.maybeHibernate(ctx, false)
			}
		}
		if err == nil && s.env.Process.Draining() && !s.stopped {
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
func (s *Session) handle(ctx context.Context, in runtime.Input) error {
	pending := []runtime.Input{in}
	for len(pending) > 0 && !s.stopped {
		in, pending = pending[0], pending[1:]
		effects, err := s.m.Handle(in)
		if errors.Is(err, runtime.ErrEnded) {
			continue // a command after the end: already cleaned up
		}
		if err != nil {
			return fmt.Errorf("session %s: %w", s.id, err)
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
	s.reconcileSends(ctx)
	return nil
}

// shutdown stops delivery and a running step. The cursor stays for a
// successor run of this process or expires by its inactivity threshold.
func (s *Session) shutdown() {
	if s.cancel != nil {
		s.cancel()
	}
	s.senders.stopAll()
	_ = s.pub.await()
	s.cur.close()
}

// reopen recreates the cursor at Applied.Next. Deliveries the old cursor
// made that the machine has not seen yet are dropped with it: the new
// cursor delivers them again in stream order. Read from the old one, they
// would reach the machine ahead of a new alias's earlier command, and a
// commit would raise Applied.Next past that command, which would then be
// skipped as processed.
func (s *Session) reopen(ctx context.Context) error {
	return s.cur.open(ctx, s.m.Snapshot().Applied.Next, false)
}

// EncodedTokens returns the stable token plus the encoded aliases.
func EncodedTokens(sessionID string, aliases []string) ([]string, error) {
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

// verifyCursor checks, after a reconnect, that the session's cursor still
// exists and recreates it if not. It reports whether to check again (the
// server did not answer yet).
func (s *Session) verifyCursor(ctx context.Context) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	ok, err := s.env.Inbox.Exists(cctx, s.cur.name)
	cancel()
	switch {
	case err == nil && ok:
		return false, nil
	case err == nil:
		return false, s.recoverCursor(ctx, errors.New("consumer not found after a reconnect"))
	}
	return ctx.Err() == nil, nil
}

// recoverCursor handles a cursor that ended unexpectedly (deleted by a
// successor, lost in a server restart, a reader error): only while a
// leader read shows the record still names this run and epoch is the
// cursor recreated, at the lowest unapplied sequence. Otherwise the
// session was taken over: it stops without side effects.
func (s *Session) recoverCursor(ctx context.Context, cause error) error {
	s.log.Warn("inbox consumer lost; checking ownership", "consumer", s.cur.name, "err", cause)
	s.cur.close()
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(50*time.Millisecond), backoff.WithMaxInterval(time.Second),
		backoff.WithMaxElapsedTime(0)), ctx)
	err := backoff.Retry(func() error {
		if err := s.env.Process.AwaitLease(ctx); err != nil {
			return backoff.Permanent(err)
		}
		cur, err := s.env.Records.LeaderSession(ctx, s.id)
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
		s.log.Info("inbox consumer recreated at the lowest unapplied sequence", "consumer", s.cur.name, "start", s.m.Snapshot().Applied.Next)
		return nil
	}, b)
	if ctx.Err() != nil && !errors.Is(err, ErrFenced) {
		return nil
	}
	return err
}
