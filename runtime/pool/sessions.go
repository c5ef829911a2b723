package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
)

// resumer resumes this process's index after each lease acquisition: a
// wake here (Owner.Wake) of every session the index names, a few at a
// time, retried while the store does not answer.
type resumer struct {
	cfg   *Config
	log   *slog.Logger
	lease *lease
	reg   *registry
	wake  func(context.Context, protocol.WakeRequest) protocol.WakeReply // Owner.Wake
}

// resumeIndex re-claims every session this process's index names, each by
// a fresh claim CAS. An entry for a session another process runs now is
// stale (a crash between index and claim, or a takeover) and is dropped.
func (o *resumer) resumeIndex(ctx context.Context) error {
	ids, err := o.listIndex(ctx)
	if err != nil && !errors.Is(err, record.ErrNotFound) {
		return fmt.Errorf("pool: list index: %w", err)
	}
	// A few at a time: a process resuming hundreds of sessions after a
	// fence must not take a round trip chain per session in series.
	eachBounded(ctx, ids, resumeParallel, func(id string) { o.resumeOne(ctx, id) })
	return nil
}

// listIndex lists this process's index, trying again (up to
// resumeRetries times, each attempt bounded by indexListTimeout) when
// baton_owners does not answer: right after an election the listing's
// consumer can fail to start, and an index left unread leaves every
// session to the next sweep.
func (o *resumer) listIndex(ctx context.Context) ([]string, error) {
	return listIndexOf(ctx, o.cfg, o.log, o.cfg.ProcessID, o.lease.valid)
}

// listIndexOf lists the index of process pid the same way, while more
// reports that trying again is still worth it.
func listIndexOf(ctx context.Context, cfg *Config, log *slog.Logger, pid string, more func() bool) ([]string, error) {
	for n := 0; ; n++ {
		lctx, cancel := context.WithTimeout(ctx, indexListTimeout)
		ids, err := cfg.Store.ListIndex(lctx, pid)
		cancel()
		if err == nil || errors.Is(err, record.ErrNotFound) || n >= resumeRetries || !more() || ctx.Err() != nil {
			return ids, err
		}
		log.Warn("list index failed; retrying", "process", pid, "err", err)
		sleep(ctx, cfg.leaseCall())
	}
}

// indexListTimeout bounds one listing of an index: a listing's consumer
// that cannot start (the stream or the meta leader is electing) is tried
// again instead of waited for.
const indexListTimeout = 2 * time.Second

// resumeGiveUp bounds how long resume retries listing the index.
const resumeGiveUp = 30 * time.Second

// resume resumes the index (resumeIndex), listing it again while that
// fails: right after an election of the owners bucket (a fence on a lost
// lease renewal is followed by one) the listing can time out, and a
// session of the index left unresumed — released by the fenced run, so no
// sweep names it — would wait for a command's wake that may have been
// lost with the fence. After resumeGiveUp it serves regardless.
func (o *resumer) resume(ctx context.Context) {
	began := time.Now()
	for pause := 250 * time.Millisecond; ; pause = min(2*pause, 2*time.Second) {
		err := o.resumeIndex(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		if time.Since(began) > resumeGiveUp {
			o.log.Error("resume failed", "err", err)
			return
		}
		o.log.Warn("resume failed; listing the index again", "err", err)
		sleep(ctx, pause)
	}
}

// resumeParallel bounds the claims a resume runs at once.
const resumeParallel = 16

// resumeRetries bounds the retries of one session's resume claim.
const resumeRetries = 8

// retriable reports a wake error another attempt may not meet: the store
// did not answer, or the claim lost its CAS to a write that landed late.
func retriable(e *protocol.ReplyError) bool {
	return e != nil && (e.Code == protocol.CodeUnavailable || e.Code == protocol.CodeConflict)
}

func (o *resumer) resumeOne(ctx context.Context, id string) {
	rep := o.wake(ctx, protocol.WakeRequest{SessionID: id, From: o.cfg.ProcessID, Source: protocol.WakeResume})
	// A claim the store could not answer (a bucket still electing its
	// leader after a NATS server died) is tried again soon, a few times,
	// rather than left to the next sweep: every claim is a CAS, so a retry
	// can only win or learn the session moved on.
	for n := 0; n < resumeRetries && retriable(rep.Error) && o.lease.valid() && ctx.Err() == nil; n++ {
		sleep(ctx, o.cfg.leaseCall())
		rep = o.wake(ctx, protocol.WakeRequest{SessionID: id, From: o.cfg.ProcessID, Source: protocol.WakeResume})
	}
	switch {
	case rep.Error != nil:
		// The orphan sweeper re-claims it (the record names this process).
		o.log.Warn("resume failed", "session", id, "err", rep.Error.Message)
	case staleEntry(rep.Outcome):
		o.reg.forgetStop(id)
		if err := o.cfg.Store.RemoveIndex(ctx, o.cfg.ProcessID, id); err != nil {
			o.log.Warn("drop stale index entry", "session", id, "err", err)
		}
	}
}

// staleEntry reports a wake outcome after which this process's index
// entry of the session is stale: it runs elsewhere, is gone, or no owner
// runs it (quarantined).
func staleEntry(out protocol.WakeOutcome) bool {
	return out == protocol.WakeElsewhere || out == protocol.WakeMissing || out == protocol.WakeQuarantined
}

// Loaded reports the IDs of the sessions this owner runs.
func (o *Owner) Loaded() []string { return o.reg.ids() }

// localStopWait bounds how long a handoff start waits for this process's own
// previous run of the session to exit.
const localStopWait = 2 * time.Second

// spawn runs a claimed session in its own goroutine. A run that fails (not
// fenced, not stopped by a lost CAS, not ended) is restarted by a fresh
// claim after a backoff, so no session is left without a running owner.
//
// A claim that completes after the lease period ended (a handoff activation
// or a wake racing with a fence or shutdown) does not run: serve's stopAll
// may be waiting on wg already, and an Add from zero concurrent with that
// Wait is a WaitGroup misuse (registry.add); the session is resumed by the next claim (this
// process's resume after it re-acquires its lease, or a peer's adoption).
func (o *Owner) spawn(s *session.Session, reason runtime.BootReason) {
	s.Activity().Touch()
	l, ctx, ok := o.reg.add(s)
	if !ok {
		o.log.Warn("claimed after the lease period ended; not running it here now (the next claim resumes it)", "session", s.ID())
		return
	}
	go func() {
		defer o.reg.exited()
		defer close(l.done)
		defer l.cancel()
		began := time.Now()
		err := s.Run(ctx, reason)
		o.stopped(ctx, l, err, time.Since(began))
	}()
}

// stopped is what follows a session's run: it leaves the loaded set, and
// is re-checked (hibernated), restarted (failed) or let go (moved on).
func (o *Owner) stopped(ctx context.Context, l *loaded, err error, ran time.Duration) {
	s, id := l.s, l.s.ID()
	log := o.log.With(slog.String("session", id), slog.Uint64("epoch", s.Epoch()))
	o.gate.dropSuspect(id)
	if !s.Hibernated() && s.Ended() == "" {
		o.reg.sawStop(id, s.RunID()) // this process lives: the run's end is no death (lived.go)
	}
	o.reg.remove(l, s.Hibernated())
	switch {
	case s.Hibernated() && ctx.Err() == nil:
		o.recheckHibernated(ctx, s)
	case errors.Is(err, ErrFenced) || errors.Is(context.Cause(ctx), ErrFenced):
		// One WARN for the process ("fenced: stopping every session");
		// the session resumes by a fresh claim once the lease is back.
		log.Debug("session stopped: process fenced")
		if errors.Is(context.Cause(ctx), ErrFenced) || ctx.Err() == nil {
			o.out.releaseFenced(s) // a fence, not a shutdown that found the lease gone
		}
	case err != nil && ctx.Err() == nil:
		log.Error("session stopped", "err", err)
		o.restartLater(id, ran)
	case err != nil:
		log.Debug("session stopped", "err", err)
	case ctx.Err() == nil && s.Ended() == "":
		o.lost(ctx, id)
	}
	if s.Hibernated() {
		o.reg.settled()
	}
}

// lost handles a session that stopped because its record moved on (a lost
// CAS, a successor's claim): if the record now names another process, this
// process's index entry is stale and removed; if it still names this
// process (its own write landed late), the session is claimed afresh.
func (o *Owner) lost(ctx context.Context, id string) {
	cur, err := o.cfg.Store.LeaderSession(ctx, id)
	switch {
	case err != nil:
		return // the sweeper decides later
	case cur.Record.OwnerProcess == o.cfg.ProcessID:
		o.restartLater(id, 0)
	default:
		o.reg.forgetStop(id)
		if err := o.cfg.Store.RemoveIndex(ctx, o.cfg.ProcessID, id); err != nil {
			o.log.Debug("remove stale index entry", "session", id, "err", err)
		}
	}
}

// restartLater re-claims a session whose run failed, after a backoff that
// grows with consecutive quick failures.
func (o *Owner) restartLater(id string, ran time.Duration) {
	n, ctx := o.reg.restarted(id, ran)
	delay := min(time.Second<<min(n, 5), 30*time.Second)
	o.reg.goBG(ctx, func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		rep := o.Wake(ctx, protocol.WakeRequest{SessionID: id, From: o.cfg.ProcessID, Source: protocol.WakeRestart})
		o.log.Info("restarted a failed session", "session", id, "outcome", rep.Outcome, "error", rep.Error)
		if staleEntry(rep.Outcome) {
			// It runs elsewhere now (a handoff that completed after all),
			// or no owner runs it: this process's index entry is stale.
			o.reg.forgetStop(id)
			if err := o.cfg.Store.RemoveIndex(ctx, o.cfg.ProcessID, id); err != nil {
				o.log.Debug("remove stale index entry", "session", id, "err", err)
			}
		}
	})
}
