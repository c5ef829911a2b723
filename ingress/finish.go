package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/nats-io/nats.go"
	"github.com/oklog/ulid/v2"
)

// An operator's finish of a quarantined session is a request in its record
// that an owner carries out (docs/architecture.md, "Asking a session for
// something"). The route writes it and then asks for it on the finish
// subjects — the session's deployment first, then any owner, which
// finishes it when that deployment has no live owner — and waits up to
// Config.FinishWait for the owner's answer. A request is never lost for
// want of an answer: every owner's sweep finds a pending finish.

// finishRetryPause paces the route's requests while an owner answers
// that it cannot finish now (fenced, another finisher at work).
const finishRetryPause = 200 * time.Millisecond

// requestFinish writes f into the quarantined record cur and waits for an
// owner to carry it out: its reply, or pending when none did in time.
func (s *Server) requestFinish(ctx context.Context, a *attached, cur record.Session, f record.FinishRequest) (protocol.FinishReply, bool, error) {
	id := cur.Record.SessionID
	f.By, f.At = "admin-"+ulid.Make().String(), s.cfg.Now().UTC()
	if f.EndedBy == record.EndedByUser {
		f.By = "user-" + ulid.Make().String()
	}
	_, err := a.store.RequestFinish(ctx, cur, f)
	for i := 0; errors.Is(err, record.ErrConflict) && i < 3; i++ {
		// Another request (the same one, at once) or a finisher's claim
		// wrote first: decide again on a fresh read.
		var again record.Session
		if _, again, err = s.quarantined(ctx, id); err != nil {
			return protocol.FinishReply{}, false, err
		}
		cur = again
		_, err = a.store.RequestFinish(ctx, cur, f)
	}
	switch {
	case errors.Is(err, record.ErrConflict):
		return protocol.FinishReply{}, false, fail(ErrConflict, "session %s changed meanwhile (revision %d moved on); nothing was written, retry", id, cur.Revision)
	case errors.Is(err, record.ErrTransition):
		return protocol.FinishReply{}, false, &Error{Err: ErrConflict, Detail: CodeFinishPending,
			Message: "session " + id + ": " + err.Error() + "; it is carried out first"}
	case errors.Is(err, record.ErrInvalid):
		return protocol.FinishReply{}, false, &Error{Err: ErrBadRequest, Detail: CodeBadRequest, Message: err.Error()}
	case err != nil:
		return protocol.FinishReply{}, false, fail(ErrUnavailable, "write the request into session %s: %v", id, err)
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.FinishWait)
	defer cancel()
	rep, done := s.awaitFinish(wctx, cur.Record.DeploymentID, id)
	return rep, !done, nil
}

// awaitFinish asks for the finish of session id until an owner reports it
// done or ctx ends (done false).
func (s *Server) awaitFinish(ctx context.Context, dep, id string) (protocol.FinishReply, bool) {
	data, _ := json.Marshal(protocol.FinishRequest{SessionID: id})
	for {
		rep, err := s.askFinish(ctx, dep, data)
		switch {
		case err == nil && rep.Error == nil:
			return rep, true
		case err != nil && errors.Is(err, nats.ErrNoResponders):
			return protocol.FinishReply{}, false // no owner runs at all
		case err == nil && rep.Error.Code == protocol.CodeRefused:
			if done, ok := s.finishedMeanwhile(ctx, id); ok {
				return done, true
			}
		}
		if err != nil {
			s.log.Debug("admin: finish request", "session", id, "err", err)
		} else {
			s.log.Debug("admin: an owner could not finish now", "session", id, "err", rep.Error)
		}
		select {
		case <-ctx.Done():
			return protocol.FinishReply{}, false
		case <-time.After(finishRetryPause):
		}
	}
}

// askFinish requests the finish from dep's pool, or from any owner when
// dep has none.
func (s *Server) askFinish(ctx context.Context, dep string, data []byte) (protocol.FinishReply, error) {
	msg, err := s.cfg.NC.RequestWithContext(ctx, s.cfg.Names.Finish(dep), data)
	if errors.Is(err, nats.ErrNoResponders) {
		msg, err = s.cfg.NC.RequestWithContext(ctx, s.cfg.Names.FinishAny(), data)
	}
	if err != nil {
		return protocol.FinishReply{}, err
	}
	var rep protocol.FinishReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		return protocol.FinishReply{}, err
	}
	return rep, nil
}

// finishedMeanwhile answers for a finish another request or a sweep
// carried out first, from the record: its floor event's seq and revision
// (the addresses and children that finish reported are not kept).
func (s *Server) finishedMeanwhile(ctx context.Context, id string) (protocol.FinishReply, bool) {
	a, err := s.topology(ctx)
	if err != nil {
		return protocol.FinishReply{}, false
	}
	cur, err := a.store.LeaderSession(ctx, id)
	if err != nil || cur.Record.FinishPending() || cur.Record.Quarantined() {
		return protocol.FinishReply{}, false
	}
	rec := cur.Record
	rep := protocol.FinishReply{SessionID: id, DeploymentID: rec.DeploymentID, EventSeq: rec.EventSeqFloor, Revision: cur.Revision}
	if d := rec.Deleted; d != nil {
		rep.Outcome, rep.EventSeq = protocol.FinishDeleted, 0
		rep.Removed = &protocol.Removed{Events: d.Removed.Events, Blobs: d.Removed.Blobs, Bytes: d.Removed.Bytes}
		return rep, true
	}
	if rec.Terminated() {
		rep.Outcome = protocol.FinishEnded
	} else {
		rep.Outcome = protocol.FinishRetried
	}
	return rep, true
}

// writePending answers a finish route: err as it is, else 202
// {"pending":true} — the request is in the record and an owner carries it
// out when one runs.
func (s *Server) writePending(w http.ResponseWriter, id, op string, err error) error {
	if err != nil {
		return err
	}
	s.log.Warn("admin: "+op+" of a quarantined session pending: no owner carried it out in time; an owner's sweep does",
		"session", id, "wait", s.cfg.FinishWait)
	return writeJSON(w, http.StatusAccepted, struct {
		Pending bool `json:"pending"`
	}{true})
}

// orEmpty is list, or an empty list for none (a JSON array, never null).
func orEmpty(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}
