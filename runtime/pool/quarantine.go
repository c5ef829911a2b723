package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/eventlog"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Quarantine (docs/driver.md, "Quarantine"): a session that cannot boot,
// or whose steps keep killing their owner process, is parked after
// Config.QuarantineAfter counted attempts instead of being retried without
// bound. The attempts are counted in the session record (record.Claim,
// record.Failed), so they survive the processes that make them.

// Quarantine defaults.
const (
	DefaultQuarantineAfter = 3
	// maxErrorText bounds the error text a record and an event keep.
	maxErrorText = 1024
)

// DefaultQuarantineBackoff is the wait before the next boot attempt after
// one, two, three or more counted attempts.
var DefaultQuarantineBackoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second}

// bootFailed records an attempt that failed before its claim (cause wraps
// ErrUnbootable) by a CAS of the record at the revision read, without
// taking ownership, and schedules the next attempt after the backoff; the
// attempt that reaches QuarantineAfter quarantines instead. Any other
// error (the store did not answer) is returned as it is, not counted.
func (o *Owner) bootFailed(ctx context.Context, cur record.Session, cause error) error {
	if !errors.Is(cause, ErrUnbootable) {
		return cause
	}
	rec, msg := cur.Record, clipText(cause.Error())
	if n := rec.BootAttempts + 1; n >= o.cfg.QuarantineAfter {
		return o.out.quarantine(ctx, cur, n, msg, nil)
	}
	next, err := record.Failed(rec, msg, "boot-"+newID(), o.now().UTC())
	if err == nil {
		_, err = o.cfg.Store.UpdateSession(ctx, next, cur.Revision)
	}
	if err != nil {
		return fmt.Errorf("%w (the attempt is not recorded: %v)", cause, err)
	}
	o.log.Info("boot attempt failed", "session", rec.SessionID, "attempt", next.BootAttempts, "quarantine_after", o.cfg.QuarantineAfter, "err", msg)
	o.retryAt(rec.SessionID, rec.OwnerProcess, o.gate.backoffLeft(next))
	return cause
}

// quarantine parks the session instead of booting it: the record moves to
// quarantined by a CAS at the revision read, carrying session.quarantined
// as its floor event, which is then appended at the subject's end (not
// through the outbox: the checkpoint may be unreadable). Whatever the
// checkpoint committed that the stream lacks is appended first, so the
// event follows every committed event: d's outbox when it could be
// decoded, else the outbox read leniently (quarantine_outbox.go). It
// returns ErrQuarantined once the record is quarantined (load then removes
// this process's index entry; the dead owner's goes with its takeover).
func (o *outside) quarantine(ctx context.Context, cur record.Session, attempts int, cause string, d *session.Checkpoint) error {
	id := cur.Record.SessionID
	app := o.appender(id)
	c, err := o.committedOf(ctx, cur.Record, d)
	if err != nil {
		return fmt.Errorf("pool: quarantine %s: %w", id, err)
	}
	seq, err := o.nextSeq(ctx, app, cur.Record, c)
	if err != nil {
		return fmt.Errorf("pool: quarantine %s: events: %w", id, err)
	}
	rec, err := o.parked(cur.Record, attempts, cause, seq, c.lost)
	if err != nil {
		return err
	}
	// Indexed before the CAS: every sweep finds a quarantined session's
	// pending finish by the quarantine index (a stale entry is removed).
	if err := o.cfg.Store.AddQuarantined(ctx, o.cfg.Deployment, id); err != nil {
		return fmt.Errorf("pool: quarantine %s: index: %w", id, err)
	}
	if _, err := o.casRecord(ctx, rec, cur.Revision); err != nil {
		return fmt.Errorf("pool: quarantine %s: %w", id, err)
	}
	if prev := cur.Record.Consumer; prev != "" {
		// The vanished owner's consumer: a quarantined session holds none
		// (it would expire by its inactivity threshold anyway). Deleted
		// before session.quarantined is appended, so a reader of the event
		// finds it gone.
		o.deleteConsumer(ctx, prev)
	}
	if err := app.Append(ctx, seq, rec.FloorEvent); err != nil {
		o.log.Debug("session.quarantined not appended; the next reader of the record appends it", "session", id, "err", err)
	}
	o.log.Warn("session quarantined", "session", id, "attempts", attempts, "error", cause, "event_seq", seq, "outbox_lost", c.lost != nil)
	return ErrQuarantined
}

// nextSeq is the seq of an event appended outside a commit: one past the
// larger of the subject's last event (after what the stream lacks is
// appended: c's committed outbox and the record's floor event), the floor
// and c's event seq.
func (o *outside) nextSeq(ctx context.Context, app *eventlog.Appender, rec record.SessionRecord, c committed) (uint64, error) {
	last, err := o.publishPending(ctx, app, rec, c.outbox)
	if err != nil {
		return 0, err
	}
	return max(rec.EventSeqFloor, c.eventSeq, last) + 1, nil
}

// parked is the quarantined record: record.Quarantine carrying
// session.quarantined at seq, at data version 2 only when lost names the
// kept checkpoint of an outbox that could not be read.
func (o *outside) parked(r record.SessionRecord, attempts int, cause string, seq uint64, lost *wire.BlobRef) (record.SessionRecord, error) {
	writer := "quarantine-" + newID()
	body := wire.LowestSessionQuarantined(wire.SessionQuarantined{Attempts: attempts, Error: cause, DeploymentID: o.cfg.Deployment}, lost)
	data, err := o.eventOf(r.SessionID, o.cfg.Deployment, seq, writer, body)
	if err != nil {
		return record.SessionRecord{}, err
	}
	q := record.QuarantineInfo{Attempts: attempts, Error: cause, Since: o.now().UTC(), DeploymentID: o.cfg.Deployment}
	return record.Quarantine(r, q, writer, record.Appended{Seq: seq, Event: data})
}

// terminated handles a wake or claim of a session an operator ended while
// it was quarantined: nothing runs it (its checkpoint does not say ended);
// only the session.ended its record carries is appended if the operator
// could not. It returns errTerminated.
func (o *outside) terminated(ctx context.Context, rec record.SessionRecord) error {
	if _, err := o.publishPending(ctx, o.appender(rec.SessionID), rec, nil); err != nil {
		o.log.Debug("append the floor event of a terminated session", "session", rec.SessionID, "err", err)
	}
	return errTerminated
}

// deleteConsumer deletes an inbox consumer, best effort.
func (o *outside) deleteConsumer(ctx context.Context, name string) {
	err := o.cfg.JS.DeleteConsumer(ctx, o.cfg.Names.InboxStream(), name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		o.log.Debug("delete consumer", "consumer", name, "err", err)
	}
}

// claimSettle bounds how long this process settles the uncertain outcome
// of its own record writes outside a commit (a claim, a quarantine).
const claimSettle = 30 * time.Second

// casRecord writes rec at rev (a claim, a quarantine); a write whose
// outcome is unknown is settled by the store's one settle
// (kv.Store.UpdateSessionSettled: a leader read of its writer stamp, the
// same CAS again while the record is still at rev), for at most
// claimSettle. A conflict is counted.
func (o *outside) casRecord(ctx context.Context, rec record.SessionRecord, rev uint64) (uint64, error) {
	sctx, cancel := context.WithTimeout(ctx, claimSettle)
	defer cancel()
	n, err := o.cfg.Store.UpdateSessionSettled(sctx, rec, rev, nil)
	if errors.Is(err, record.ErrConflict) {
		o.metrics.conflicts.WithLabelValues("claim").Inc()
	}
	if err == nil && o.index != nil {
		o.index(record.Session{Record: rec, Revision: n})
	}
	return n, err
}

// publishPending appends what the session's event subject may lack before
// anything follows it: a checkpoint's committed outbox and the record's
// floor event, in seq order, each skipped when already there. A gap it
// cannot fill (an outbox event after one that could not be read) is left:
// the next event follows the last one on the subject. It returns the seq
// of the subject's last event.
func (o *outside) publishPending(ctx context.Context, app *eventlog.Appender, rec record.SessionRecord, outbox []wire.Event) (uint64, error) {
	type pending struct {
		seq  uint64
		data []byte
	}
	var evs []pending
	for _, e := range outbox {
		data, err := wire.EncodeEvent(nil, e)
		if err != nil {
			return 0, err
		}
		evs = append(evs, pending{e.Seq, data})
	}
	if rec.EventSeqFloor > 0 && len(rec.FloorEvent) > 0 {
		evs = append(evs, pending{rec.EventSeqFloor, rec.FloorEvent})
	}
	slices.SortStableFunc(evs, func(a, b pending) int { return cmp.Compare(a.seq, b.seq) })
	for _, e := range evs {
		if err := app.Append(ctx, e.seq, e.data); err != nil && !errors.Is(err, ErrEventGap) {
			return 0, err
		}
	}
	last, err := app.Last(ctx)
	if err != nil {
		return 0, err
	}
	return last, nil
}

// appender is a fresh appender of session id's events.
func (o *outside) appender(id string) *eventlog.Appender {
	return eventlog.NewAppender(o.cfg.JS, o.events, o.cfg.Names.Events(id), id)
}

// eventOf encodes an event appended outside a commit, stamped with the
// writer of the record transition that carries it and deployment dep (a
// quarantine's: this one; a finish's: the session's own).
func (o *outside) eventOf(id, dep string, seq uint64, runID string, body wire.EventBody) ([]byte, error) {
	e, err := wire.NewBodyEvent(body)
	if err != nil {
		return nil, err
	}
	e.SessionID, e.Seq, e.Time, e.OwnerRunID, e.DeploymentID = id, seq, o.now().UTC(), runID, dep
	return wire.EncodeEvent(o.cfg.Events, e)
}

// retryAt wakes session id here after wait (once per session at a time),
// as a claimer for from (the owner process its record named): the next
// boot attempt after a failed or deferred one. If this process stops
// first, the sweepers try it.
func (o *Owner) retryAt(id, from string, wait time.Duration) {
	if !o.gate.scheduleRetry(id) {
		return
	}
	ctx := o.reg.serving()
	o.reg.goBG(ctx, func() {
		sleep(ctx, max(wait, 0))
		o.gate.retried(id)
		if ctx.Err() != nil {
			return
		}
		rep := o.Wake(ctx, protocol.WakeRequest{SessionID: id, From: from, Source: protocol.WakeRestart})
		o.log.Debug("boot attempt after the backoff", "session", id, "outcome", rep.Outcome, "error", rep.Error)
	})
}

// deferBoot defers a boot attempt that comes before rec's backoff has
// passed: ErrDeferred, and a retry here when it has.
func (o *Owner) deferBoot(rec record.SessionRecord) error {
	wait := o.gate.backoffLeft(rec)
	if wait <= 0 {
		return nil
	}
	o.retryAt(rec.SessionID, rec.OwnerProcess, wait)
	return ErrDeferred
}

// clipText bounds an error text kept in a record or event.
func clipText(s string) string {
	if len(s) <= maxErrorText {
		return s
	}
	return s[:maxErrorText-3] + "..."
}
