package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
)

// The finisher (docs/driver.md, "Quarantine"): an operator's end or retry
// of a quarantined session — or a user's end of it, or of a session no
// owner of its deployment runs — is a request in its record
// (record.Finish), and an owner carries it out — the one writer of a
// session's events. The
// session's own deployment finishes it when one of its owners is live;
// otherwise any owner does, for the finish only: the claim
// (record.ClaimFinish) keeps the session's deployment, and nothing runs
// the session's agent. A request on the finish subjects only speeds a
// finish up; the sweep finds every pending one (finishPending).

// finisher carries out the pending finishes: it serves the finish
// subjects, claims a session for its finish (the registry's claim guard,
// the lease, the peers' liveness) and writes the end or retry outside any
// run (outside), then tells the family (sender) or wakes the deployment.
type finisher struct {
	cfg     *Config
	log     *slog.Logger
	metrics *metrics
	lease   *lease
	reg     *registry
	peers   *peerSet
	out     *outside
	send    *sender
	timers  session.Timers
	erasers eraser // what a delete removes with
}

func (o *finisher) now() time.Time { return o.cfg.Now() }

// Finish carries out the finish that session id's record holds (see
// finisher.Finish); the sweep calls it for every pending finish it finds.
func (o *Owner) Finish(ctx context.Context, id string, anyOwner bool) protocol.FinishReply {
	return o.fin.Finish(ctx, id, anyOwner)
}

// finishRelayTimeout bounds the request an owner of another deployment
// relays to the session's own deployment before finishing it itself.
const finishRelayTimeout = 5 * time.Second

// serveFinish answers a request on this deployment's finish subject, or
// (anyOwner) on the subject every owner serves.
func (o *finisher) serveFinish(anyOwner bool) nats.MsgHandler {
	return func(msg *nats.Msg) {
		ctx := o.reg.serving()
		o.reg.goBG(ctx, func() {
			req, err := protocol.DecodeFinish(msg.Data)
			if err != nil {
				respond(msg, protocol.FinishReply{Error: protocol.Refuse(protocol.CodeBadRequest, err)})
				return
			}
			respond(msg, o.Finish(ctx, req.SessionID, anyOwner))
		})
	}
}

// Finish carries out the finish that session id's record holds. An owner
// asked as any owner (anyOwner) of a session of another deployment first
// relays the request to that deployment's pool, and finishes it itself
// only when none of its owners answers.
func (o *finisher) Finish(ctx context.Context, id string, anyOwner bool) protocol.FinishReply {
	rep := protocol.FinishReply{SessionID: id}
	if err := subjects.ValidateSessionID(id); err != nil {
		rep.Error = protocol.Refuse(protocol.CodeBadRequest, err)
		return rep
	}
	cur, err := o.cfg.Store.LeaderSession(ctx, id)
	switch {
	case errors.Is(err, record.ErrNotFound):
		rep.Error = protocol.Refuse(protocol.CodeRefused, err)
		return rep
	case err != nil:
		rep.Error = protocol.Refuse(protocol.CodeUnavailable, err)
		return rep
	case !cur.Record.FinishPending():
		rep.Error = protocol.Refuse(protocol.CodeRefused, fmt.Errorf("session %s has no pending finish (%s)", id, cur.Record.State))
		return rep
	}
	// A delete runs nothing of the session's deployment: any owner does it.
	if dep := cur.Record.DeploymentID; anyOwner && dep != o.cfg.Deployment && cur.Record.Finish.Op != record.FinishDelete {
		if relayed, ok := o.relayFinish(ctx, dep, id); ok {
			return relayed
		}
	}
	rep, err = o.claimAndFinish(ctx, cur, 0)
	if err != nil {
		code := protocol.CodeUnavailable
		if errors.Is(err, record.ErrConflict) {
			code = protocol.CodeConflict
		}
		rep = protocol.FinishReply{SessionID: id, Error: protocol.Refuse(code, err)}
	}
	o.metrics.finished(string(rep.Outcome), rep.Error)
	return rep
}

// relayFinish asks deployment dep's pool to finish session id; ok is false
// when no owner of dep answered (this owner finishes it).
func (o *finisher) relayFinish(ctx context.Context, dep, id string) (protocol.FinishReply, bool) {
	data, _ := json.Marshal(protocol.FinishRequest{SessionID: id})
	rctx, cancel := context.WithTimeout(ctx, finishRelayTimeout)
	defer cancel()
	msg, err := o.cfg.NC.RequestWithContext(rctx, o.cfg.Names.Finish(dep), data)
	if errors.Is(err, nats.ErrNoResponders) {
		return protocol.FinishReply{}, false
	}
	var rep protocol.FinishReply
	if err == nil {
		err = json.Unmarshal(msg.Data, &rep)
	}
	if err != nil {
		rep = protocol.FinishReply{SessionID: id, Error: protocol.Refuse(protocol.CodeUnavailable, err)}
	}
	return rep, true
}

// claimAndFinish claims the session for its finish and carries the
// request out; one finish of a session runs at a time in this process
// (the claims' guard), and a live claimer in another process is left to
// finish it. depth counts the generations of a delete's children above.
func (o *finisher) claimAndFinish(ctx context.Context, cur record.Session, depth int) (protocol.FinishReply, error) {
	rec := cur.Record
	id := rec.SessionID
	if !o.lease.valid() {
		return protocol.FinishReply{}, ErrFenced
	}
	if p := rec.OwnerProcess; p != "" && p != o.cfg.ProcessID && o.peers.live(p) {
		return protocol.FinishReply{}, fmt.Errorf("session %s is being finished by process %s", id, p)
	}
	if !o.reg.beginLoad(id) {
		return protocol.FinishReply{}, fmt.Errorf("session %s is being finished here", id)
	}
	defer o.reg.endLoad(id)
	claimed, err := record.ClaimFinish(rec, o.cfg.ProcessID, "finish-"+newID())
	if err != nil {
		return protocol.FinishReply{}, err
	}
	rev, err := o.out.casRecord(ctx, claimed, cur.Revision)
	if err != nil {
		return protocol.FinishReply{}, fmt.Errorf("claim the finish of %s: %w", id, err)
	}
	cur = record.Session{Record: claimed, Revision: rev}
	var rep protocol.FinishReply
	switch claimed.Finish.Op {
	case record.FinishRetry:
		rep, err = o.finishRetry(ctx, cur)
	case record.FinishDelete:
		rep, err = o.finishDelete(ctx, cur, depth)
	default:
		rep, err = o.finishEnd(ctx, cur)
	}
	if err == nil {
		// Nothing pending: its quarantine index entry goes (a sweep removes
		// it if this fails). A session that was not quarantined was indexed
		// under its own deployment when its end was requested.
		dep := rec.DeploymentID
		if rec.Quarantined() && rec.Quarantine != nil {
			dep = rec.Quarantine.DeploymentID
		}
		if rerr := o.cfg.Store.RemoveQuarantined(ctx, dep, id); rerr != nil {
			o.log.Debug("finish: remove the quarantine index entry", "session", id, "err", rerr)
		}
	}
	return rep, err
}

// appendOutside appends an event outside any commit of the claimed
// session — after what its stream may lack (the record's floor event) —
// carried by the record transition next builds, written at cur's revision.
// It returns the new record, its revision and the event's seq.
func (o *finisher) appendOutside(ctx context.Context, cur record.Session, body wire.EventBody,
	next func(writer string, ev record.Appended) (record.SessionRecord, error)) (record.Session, uint64, error) {
	rec := cur.Record
	app := o.out.appender(rec.SessionID)
	seq, err := o.out.nextSeq(ctx, app, rec, committed{})
	if err != nil {
		return record.Session{}, 0, fmt.Errorf("events of %s: %w", rec.SessionID, err)
	}
	writer := "finish-" + newID()
	data, err := o.out.eventOf(rec.SessionID, rec.DeploymentID, seq, writer, body)
	if err != nil {
		return record.Session{}, 0, err
	}
	out, err := next(writer, record.Appended{Seq: seq, Event: data})
	if err != nil {
		return record.Session{}, 0, err
	}
	rev, err := o.out.casRecord(ctx, out, cur.Revision)
	if err != nil {
		return record.Session{}, 0, err
	}
	if err := app.Append(ctx, seq, data); err != nil {
		o.log.Warn("finish: event not appended; the next reader of the record appends it", "session", rec.SessionID, "seq", seq, "err", err)
	}
	return record.Session{Record: out, Revision: rev}, seq, nil
}

// finishEnd ends the claimed session: session.ended {terminated} by a
// record-only end (record.Terminate: no checkpoint state version expresses
// that reason), every address tombstoned, the timer schedule purged, and
// its family told through the machine (family.go).
func (o *finisher) finishEnd(ctx context.Context, cur record.Session) (protocol.FinishReply, error) {
	rec := cur.Record
	id := rec.SessionID
	f := *rec.Finish
	done, seq, err := o.appendOutside(ctx, cur, wire.LowestSessionEndedBy(wire.EndTerminated, f.Requester(), f.Message),
		func(writer string, ev record.Appended) (record.SessionRecord, error) {
			return record.Terminate(rec, writer, ev)
		})
	if err != nil {
		return protocol.FinishReply{}, err
	}
	rep := protocol.FinishReply{SessionID: id, Outcome: protocol.FinishEnded, DeploymentID: rec.DeploymentID,
		EventSeq: seq, Revision: done.Revision}
	if rep.Tombstoned, err = o.tombstoneAll(ctx, rec); err != nil {
		return protocol.FinishReply{}, fmt.Errorf("session %s ended; tombstoning its addresses failed (repeat the end): %w", id, err)
	}
	if err := o.timers.Cancel(ctx, id); err != nil {
		o.log.Warn("finish: purge the ended session's timer schedule", "session", id, "err", err)
	}
	if rec.Consumer != "" && !rec.Quarantined() {
		o.out.deleteConsumer(ctx, rec.Consumer) // a quarantine deleted its own
	}
	rep.ChildrenEnded, rep.How = o.endFamily(ctx, rec)
	o.log.Warn("finish: ended a session outside any run, on request", "by", f.Requester(), "session", id, "event_seq", seq,
		"tombstoned", len(rep.Tombstoned), "children_ended", len(rep.ChildrenEnded), "how", rep.How)
	return rep, nil
}

// finishRetry retries the claimed session: session.retried, the record
// hibernated with its attempts cleared (record.Retry) — on its own
// deployment or moved to the requested one — and that deployment woken.
func (o *finisher) finishRetry(ctx context.Context, cur record.Session) (protocol.FinishReply, error) {
	rec := cur.Record
	f := *rec.Finish
	done, seq, err := o.appendOutside(ctx, cur, wire.SessionRetried{DeploymentID: f.DeploymentID},
		func(writer string, ev record.Appended) (record.SessionRecord, error) {
			return record.Retry(rec, f.DeploymentID, f.Force, writer, ev)
		})
	if err != nil {
		return protocol.FinishReply{}, err
	}
	rep := protocol.FinishReply{SessionID: rec.SessionID, Outcome: protocol.FinishRetried, DeploymentID: f.DeploymentID,
		FromDeploymentID: rec.DeploymentID, Force: f.Force, EventSeq: seq, Revision: done.Revision}
	rep.WakeOutcome, rep.WakeProcess, rep.WakeError = o.wakeOnce(ctx, f.DeploymentID, rec.SessionID)
	o.log.Warn("finish: retried a quarantined session at an operator's request", "session", rec.SessionID,
		"from", rec.DeploymentID, "to", f.DeploymentID, "force", f.Force, "wake", rep.WakeOutcome, "wake_error", rep.WakeError)
	return rep, nil
}

// wakeOnce asks dep's pool to boot the session and reports its answer.
func (o *finisher) wakeOnce(ctx context.Context, dep, id string) (outcome, process, errText string) {
	data, _ := json.Marshal(protocol.WakeRequest{SessionID: id, Source: protocol.WakeFinish})
	wctx, cancel := context.WithTimeout(ctx, wakeTimeout)
	defer cancel()
	msg, err := o.cfg.NC.RequestWithContext(wctx, o.cfg.Names.Wake(dep), data)
	if errors.Is(err, nats.ErrNoResponders) {
		return "", "", "no owner of deployment " + dep + " is running; the session boots on the next wake"
	}
	if err != nil {
		return "", "", err.Error()
	}
	var rep protocol.WakeReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return "", "", "wake reply: " + err.Error()
	}
	if rep.Error != nil {
		return string(rep.Outcome), rep.ProcessID, rep.Error.Error()
	}
	return string(rep.Outcome), rep.ProcessID, ""
}

// tombstoneAll tombstones every address of the session whose hook names
// it: the stable one and the checkpoint's aliases (read leniently: the
// checkpoint of a quarantined session may not decode here).
func (o *finisher) tombstoneAll(ctx context.Context, rec record.SessionRecord) ([]string, error) {
	addrs := []string{rec.SessionID}
	if p, err := wire.PeekCheckpoint(rec.Checkpoint); err == nil && len(p.Tokens) > 1 {
		addrs = append(addrs, p.Tokens[1:]...)
	}
	done := []string{}
	for _, addr := range addrs {
		tok, err := subjects.EncodeToken(addr)
		if err != nil {
			continue
		}
		h, rev, err := o.cfg.Store.GetHook(ctx, tok)
		switch {
		case errors.Is(err, record.ErrNotFound) || err == nil && h.SessionID != rec.SessionID:
			continue
		case err != nil:
			return done, err
		case !h.Tombstone:
			if _, err := o.cfg.Store.Tombstone(ctx, tok, rev); err != nil && !errors.Is(err, record.ErrConflict) {
				return done, err
			}
		}
		done = append(done, addr)
	}
	return done, nil
}
