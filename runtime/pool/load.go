package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// Load claims an existing session for this process (epoch+1) and runs it:
// crash recovery, a restart, or a wake. The index entry is written before
// the claim, so a crash in between leaves a harmless stale entry. A session
// already running (or being claimed) here is left alone.
func (o *Owner) Load(ctx context.Context, id string, reason runtime.BootReason) error {
	_, err := o.load(ctx, id, reason, nil, nil)
	if errors.Is(err, errClaiming) {
		return nil
	}
	return err
}

// load is Load; it reports whether it claimed the session: false with no
// error when the session runs here already, errClaiming while another
// claim of it here is in progress. seen is the record as the caller just
// read it from the leader (nil: read it here, after the index entry); the
// claim is a CAS at its revision either way, so a record that moved on
// meanwhile makes the claim conflict, never succeed.
// adopt, for BootAdopt only, takes a session of a retired deployment
// (retired.go); its ID, source and epoch are filled in from the claim.
func (o *Owner) load(ctx context.Context, id string, reason runtime.BootReason, seen *record.Session, adopt *runtime.AdoptInfo) (bool, error) {
	if !o.lease.valid() {
		return false, ErrFenced
	}
	if ok, err := o.reg.reserve(ctx, id); !ok {
		if err == nil && !o.reg.isLoaded(id) {
			// Another claim here has not run the session yet: it may still
			// be deferred or fail. Answered "running", an adopter would drop
			// the dead process's index entry of a session nobody runs.
			err = errClaiming
		}
		return false, err
	}
	defer o.reg.endLoad(id)
	if err := o.cfg.Store.AddIndex(ctx, o.cfg.ProcessID, id); err != nil {
		return false, err
	}
	o.fp.afterIndex(id)
	cur, err := o.leaderRecord(ctx, id, seen)
	if err != nil {
		return false, fmt.Errorf("pool: load %s: %w", id, err)
	}
	from := cur.Record.DeploymentID
	if from != o.cfg.Deployment && adopt == nil {
		return false, fmt.Errorf("pool: session %s belongs to deployment %q", id, from)
	}
	if !o.lease.valid() {
		return false, ErrFenced
	}
	b, err := o.claim(ctx, cur)
	if errors.Is(err, ErrQuarantined) || errors.Is(err, errEndPending) {
		// No owner holds a quarantined session (or one whose end is
		// pending): no index entry either.
		if err := o.cfg.Store.RemoveIndex(ctx, o.cfg.ProcessID, id); err != nil && !errors.Is(err, record.ErrNotFound) {
			o.log.Debug("remove index entry of quarantined session", "session", id, "err", err)
		}
	}
	if err != nil {
		return false, err
	}
	o.fp.afterClaim(id)
	switch {
	case adopt != nil:
		a := *adopt
		a.ID, a.From, a.Epoch = "adopt-"+b.Record.OwnerRunID, from, b.Record.Epoch
		b.Adoption, b.Arrival, reason = &a, nil, runtime.BootAdopt
		o.log.Info("adopted a session of a retired deployment", "session", id, "from", from, "epoch", a.Epoch, "force", a.Force)
	case b.Arrival != nil:
		reason = runtime.BootHandoff
	}
	s, err := session.New(o.env, b)
	if err != nil {
		return false, err
	}
	o.spawn(s, reason)
	return true, nil
}

// claim CASes the record to this run: epoch+1, this process, a new consumer.
// The checkpoint (and its history segments) must be readable first: an
// owner never claims a session it cannot run. A quarantined record is
// refused (ErrQuarantined), an attempt before the quarantine backoff has
// passed is deferred (ErrDeferred); an unreadable checkpoint is a counted
// attempt, and the attempt that reaches Config.QuarantineAfter
// quarantines the session instead of claiming it (quarantine.go).
func (o *Owner) claim(ctx context.Context, cur record.Session) (session.Boot, error) {
	if err := o.mayBoot(ctx, cur.Record); err != nil {
		return session.Boot{}, err
	}
	d, err := session.ReadCheckpoint(ctx, o.env, cur.Record.SessionID, cur.Record.Checkpoint)
	if err != nil {
		return session.Boot{}, o.bootFailed(ctx, cur, err)
	}
	d.SetFloor(cur.Record)
	boot := o.bootOf(cur.Record, d)
	if err := o.admit(ctx, cur, &d, boot); err != nil {
		return session.Boot{}, err
	}
	rec, err := o.claimCAS(ctx, cur, boot)
	var b session.Boot
	if err == nil {
		b, err = o.claimed(ctx, cur, rec, d)
	}
	if err != nil {
		o.gate.dropSuspect(cur.Record.SessionID)
	}
	return b, err
}

// mayBoot refuses a record no owner runs (quarantined, ended outside a
// run, or with an end pending: the finisher is started on it) and defers
// an attempt before the quarantine backoff passed.
func (o *Owner) mayBoot(ctx context.Context, rec record.SessionRecord) error {
	switch {
	case rec.Quarantined():
		return ErrQuarantined
	case rec.Terminated():
		return o.out.terminated(ctx, rec)
	case rec.FinishPending():
		o.fin.finishLater(rec.SessionID)
		return errEndPending
	}
	return o.deferBoot(rec)
}

// admit decides a readable record's attempt (record.Attempt): the one that
// reaches QuarantineAfter quarantines the session, a suspect that must run
// alone (record.Alone) waits for this process's suspect slot (gate.go),
// and the floor event goes on the stream before this
// run's first event.
func (o *Owner) admit(ctx context.Context, cur record.Session, d *session.Checkpoint, boot record.Boot) error {
	id := cur.Record.SessionID
	switch n := record.Attempt(cur.Record, boot); {
	case n >= o.cfg.QuarantineAfter:
		return o.out.quarantine(ctx, cur, n, record.Failure(cur.Record), d)
	case record.Alone(boot, n, o.cfg.QuarantineAfter) && !o.gate.takeSuspect(id):
		o.retryAt(id, cur.Record.OwnerProcess, suspectRetry+jitter(id, n, suspectRetry))
		return ErrDeferred
	}
	if len(cur.Record.FloorEvent) == 0 {
		return nil
	}
	if _, err := o.out.publishPending(ctx, o.out.appender(id), cur.Record, nil); err != nil {
		o.gate.dropSuspect(id)
		return fmt.Errorf("pool: claim %s: floor event: %w", id, err)
	}
	return nil
}

// claimCAS is the claim's one write: record.Claim at the revision read
// (a staged record whose source died is adopted: the handoff failed), a
// lost reply settled by a leader read.
func (o *Owner) claimCAS(ctx context.Context, cur record.Session, boot record.Boot) (claimedRec, error) {
	rec, err := record.Claim(cur.Record, o.cfg.newOwner(), boot)
	if err != nil {
		return claimedRec{}, err
	}
	rev, err := o.out.casRecord(ctx, rec, cur.Revision)
	if err != nil {
		return claimedRec{}, fmt.Errorf("pool: claim %s: %w", rec.SessionID, err)
	}
	o.reg.forgetStop(rec.SessionID)
	if rec.BootAttempts > cur.Record.BootAttempts {
		o.log.Info("claimed a session whose last owner vanished unsettled", "session", rec.SessionID,
			"attempt", rec.BootAttempts, "quarantine_after", o.cfg.QuarantineAfter)
	}
	return claimedRec{rec, rev}, nil
}

// claimedRec is a record as the claim wrote it, at its revision.
type claimedRec struct {
	rec record.SessionRecord
	rev uint64
}

// claimed is the boot of the session a claim took: the handoff marker
// cleaned, the owned tokens, the machine at the checkpoint.
func (o *Owner) claimed(ctx context.Context, cur record.Session, c claimedRec, d session.Checkpoint) (session.Boot, error) {
	rec := c.rec
	if _, err := handoff.Clean(ctx, o.cfg.Store, rec.SessionID); err != nil {
		o.log.Debug("clean handoff marker", "session", rec.SessionID, "err", err)
	}
	tokens, err := ownedTokens(ctx, &o.cfg, o.log, rec.SessionID, d.Snap.Aliases)
	if err != nil {
		return session.Boot{}, err
	}
	// The boot re-publishes the checkpoint's outbox as committed, stamps
	// and all.
	b := session.Boot{Record: rec, Revision: c.rev, Checkpoint: d, Tokens: tokens, Predecessor: cur.Record.Consumer,
		IdleSince: cur.Record.UpdatedAt, Orphans: cur.Record.State != record.StateHibernated}
	if h := record.Unconfirmed(cur.Record); h != nil {
		// A handoff successor that died before its first commit: this run
		// records handoff.started/completed in its boot commit instead.
		b.Arrival = &runtime.HandoffInfo{ID: h.ID, From: h.From, Epoch: rec.Epoch,
			Trigger: runtime.Ref{Seq: h.TriggerSeq, ID: h.TriggerCommandID}}
	}
	return b, nil
}

// ownedTokens is the token set a booting owner filters on: the stable token
// plus every committed alias whose hook names this session. A committed
// alias without a hook (a crash between the commit and the hook) is claimed
// now; one held by another session is left out, so this session never reads
// or purges another session's address.
func ownedTokens(ctx context.Context, cfg *Config, log *slog.Logger, id string, aliases []string) ([]string, error) {
	tokens := []string{subjects.StableToken(id)}
	for _, a := range aliases {
		tok, err := subjects.EncodeToken(a)
		if err != nil {
			continue
		}
		_, err = cfg.Store.CreateHook(ctx, record.Hook{Token: tok, Address: a, SessionID: id, WireV: wire.CurrentVersion})
		var owned *record.OwnedError
		switch {
		case err == nil || errors.As(err, &owned) && owned.SessionID == id:
			if !slices.Contains(tokens, tok) {
				tokens = append(tokens, tok)
			}
		case errors.As(err, &owned):
			log.Warn("alias held by another session; not filtered", "session", id, "alias", a, "owner", owned.SessionID)
		default:
			return nil, fmt.Errorf("pool: alias %q of %s: %w", a, id, err)
		}
	}
	return tokens, nil
}

// IsLoaded reports whether the session runs in this owner process.
func (o *Owner) IsLoaded(id string) bool { return o.reg.isLoaded(id) }

// leaderRecord returns seen, or reads the record from the leader.
func (o *Owner) leaderRecord(ctx context.Context, id string, seen *record.Session) (record.Session, error) {
	if seen != nil {
		return *seen, nil
	}
	return o.cfg.Store.LeaderSession(ctx, id)
}
