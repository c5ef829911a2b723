package ingress

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"unicode/utf8"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
	"github.com/oklog/ulid/v2"
)

// The user's end of a session (docs/api.md, "Ending a session"): POST
// /v1/sessions/{id}/end, and the end operation over NATS. A session an
// owner may be running is asked by an inbox command of kind terminate,
// which its owner applies at once (the running step cancelled, its waits,
// tasks and children ended, session.ended {reason: terminated, by: user,
// message}). A quarantined session runs nowhere: the end is a request in
// its record that an owner carries out for it (the finisher, as the admin
// end is), with the same event.

var endKeys = []string{"message", "caller", "idempotencyKey"}

// ParseEnd parses the body of the user's end of session sessionID (from
// the path; "" for the NATS form, whose body names it): {"message"}
// optional, at most wire.MaxEndMessageBytes bytes of UTF-8, plus the
// optional caller and idempotencyKey. An empty body is an empty object.
func ParseEnd(b []byte, sessionID string, lim Limits) (Request, error) {
	r, v, err := parseSessionOp(b, sessionID, lim, endKeys)
	if err != nil {
		return Request{}, err
	}
	r.Kind = wire.KindTerminate
	if v.Message != nil {
		m := *v.Message
		switch {
		case m == "":
			return Request{}, bad("message is empty: leave it out, or say why the conversation ends")
		case !utf8.ValidString(m):
			return Request{}, bad("message is not valid UTF-8")
		case len(m) > wire.MaxEndMessageBytes:
			return Request{}, bad("message is %d bytes, the limit is %d", len(m), wire.MaxEndMessageBytes)
		}
		r.EndMessage = m
	}
	return r, r.common(v)
}

func (s *Server) httpUserEnd(w http.ResponseWriter, r *http.Request) error {
	return s.sessionOpVia(w, r, func(b []byte, id string) (Request, error) { return ParseEnd(b, id, s.cfg.Limits) }, s.EndSession)
}

// EndSession ends a session at its user's request. A session an owner may
// be running gets a terminate command in its inbox (Send). One that runs
// nowhere is ended by the finisher (any owner, outside a run), from an end
// request written into its record: a quarantined session, or one whose
// deployment has no live owner and none that would take it (the intent
// rule; the record CAS makes a claim that lands first win, and the end
// then goes to the inbox). The receipt's seq is 0 when nothing went to
// the inbox. A session already ended is 410 gone; a deployment that cannot
// read the terminate kind is 422 unsupported_command, nothing sent.
func (s *Server) EndSession(ctx context.Context, r Request) (Receipt, error) {
	if r.Kind != wire.KindTerminate || r.SessionID == "" {
		return Receipt{}, bad("not an end request")
	}
	a, err := s.topology(ctx)
	if err != nil {
		return Receipt{}, err
	}
	for range endAttempts {
		cur, err := a.sessionRecord(ctx, r.SessionID)
		if err != nil {
			break // Send reports what is wrong with the session
		}
		rec := cur.Record
		switch {
		case rec.IsDeleted():
			return Receipt{}, deletedErr(rec.SessionID)
		case rec.Quarantined():
			return s.endQuarantined(ctx, a, cur, r)
		case rec.FinishPending():
			return s.endReceipt(a, rec), nil // an end already asked for: applied once
		}
		orphan, err := s.runsNowhere(ctx, a, rec)
		if err != nil {
			return Receipt{}, err
		}
		if !orphan {
			break
		}
		rc, err := s.endOrphan(ctx, a, cur, r)
		if errors.Is(err, record.ErrConflict) {
			continue // an owner's claim (or another end) landed first: decide again
		}
		return rc, err
	}
	return s.Send(ctx, r)
}

// endAttempts bounds EndSession's decisions against a record that moves
// on between its read and the end request's CAS.
const endAttempts = 3

// runsNowhere reports a session no owner runs or would take: active,
// paused or hibernated on a deployment with no live owner (its last
// holder's lease gone too), and no deployment this ingress stamps that
// would adopt it. The deployment must read the terminate kind, so that an
// owner of it that starts before the finisher leaves the session alone
// (it refuses a record whose end is pending); one that cannot is 422
// unsupported_command, as for a live one.
func (s *Server) runsNowhere(ctx context.Context, a *attached, rec record.SessionRecord) (bool, error) {
	dep := rec.DeploymentID
	switch rec.State {
	case record.StateActive, record.StatePaused, record.StateHibernated:
	default:
		return false, nil
	}
	stamp, _ := s.stamp(a)
	if s.ownerLive(a, dep, stamp) || a.fleet.LiveOwners(dep) > 0 {
		return false, nil
	}
	if p := rec.OwnerProcess; p != "" {
		if _, _, err := a.store.GetLease(ctx, p); !errors.Is(err, record.ErrNotFound) {
			return false, nil // its holder may live (or the lease did not answer): the inbox
		}
	}
	ok, vs, err := s.readsVersion(ctx, a, dep, wire.TerminateVersion)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, unsupported(slices.Max(append([]int{1}, vs...)), dep, wire.KindTerminate)
	}
	return true, nil
}

// endOrphan writes the user's end into the record of a session that runs
// nowhere (indexed first where every owner's sweep finds it) and waits,
// up to Config.FinishWait, for an owner to carry it out.
func (s *Server) endOrphan(ctx context.Context, a *attached, cur record.Session, r Request) (Receipt, error) {
	rec := cur.Record
	id := rec.SessionID
	if err := a.store.AddQuarantined(ctx, rec.DeploymentID, id); err != nil {
		return Receipt{}, fail(ErrUnavailable, "index the end of session %s: %v", id, err)
	}
	f := record.FinishRequest{Op: record.FinishEnd, EndedBy: record.EndedByUser, Message: r.EndMessage,
		By: "user-" + ulid.Make().String(), At: s.cfg.Now().UTC()}
	if _, err := a.store.RequestFinish(ctx, cur, f); err != nil {
		if errors.Is(err, record.ErrConflict) || errors.Is(err, record.ErrTransition) {
			return Receipt{}, record.ErrConflict
		}
		return Receipt{}, fail(ErrUnavailable, "write the end into session %s: %v", id, err)
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.FinishWait)
	defer cancel()
	if rep, done := s.awaitFinish(wctx, rec.DeploymentID, id); done {
		s.log.Info("ended a session no owner ran, at its user's request", "session", id, "deployment", rec.DeploymentID, "event_seq", rep.EventSeq)
	} else {
		s.log.Warn("end of a session no owner runs pending: an owner's sweep carries it out", "session", id, "wait", s.cfg.FinishWait)
	}
	return s.endReceipt(a, rec), nil
}

// endQuarantined writes the user's end into the quarantined record cur
// and waits, up to Config.FinishWait, for an owner to carry it out. An
// end already pending is the same request (applied once); a retry pending
// is 409 finish_pending.
func (s *Server) endQuarantined(ctx context.Context, a *attached, cur record.Session, r Request) (Receipt, error) {
	rec := cur.Record
	rep, pending, err := s.requestFinish(ctx, a, cur, record.FinishRequest{
		Op: record.FinishEnd, EndedBy: record.EndedByUser, Message: r.EndMessage})
	switch {
	case errors.Is(err, ErrConflict) && asError(err).Detail == CodeNotQuarantined:
		return s.Send(ctx, r) // retried meanwhile: an owner runs it again
	case err != nil:
		return Receipt{}, err
	case pending:
		s.log.Warn("end of a quarantined session pending: no owner carried it out in time; an owner's sweep does",
			"session", rec.SessionID, "wait", s.cfg.FinishWait)
	default:
		s.log.Info("ended a quarantined session at its user's request", "session", rec.SessionID, "event_seq", rep.EventSeq)
	}
	return s.endReceipt(a, rec), nil
}

// endReceipt answers an end the finisher carries out: nothing went to the
// inbox (seq 0).
func (s *Server) endReceipt(a *attached, rec record.SessionRecord) Receipt {
	return Receipt{SessionID: rec.SessionID, DeploymentID: rec.DeploymentID, OwnerLive: a.fleet.LiveOwners(rec.DeploymentID) > 0}
}
