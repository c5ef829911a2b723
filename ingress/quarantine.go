package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// The way out of a quarantine (docs/api.md, "Quarantine"): an operator
// retries the session — on its own deployment or on another one, which
// adopts it — or ends it. Both are record transitions by CAS at the
// revision read from the stream leader, each carrying the event it appends
// (session.retried, session.ended) as the session's new event-seq floor.

// Codes of the quarantine routes (409).
const (
	CodeNotQuarantined = "not_quarantined" // retry or end of a session that is not quarantined
	CodeWaitsPending   = "waits_pending"   // retry on another deployment of a session with live waits, without force
)

var adminRetryKeys = []string{"deploymentId", "force"}

func (s *Server) quarantineRoutes(mux *http.ServeMux) {
	s.route(mux, "POST /v1/admin/sessions/{id}/retry", s.admin(s.httpRetry))
	s.route(mux, "POST /v1/admin/sessions/{id}/end", s.admin(s.httpEnd))
}

// Retried answers POST /v1/admin/sessions/{id}/retry.
type Retried struct {
	SessionID        string `json:"sessionId"`
	DeploymentID     string `json:"deploymentId"`     // where it boots
	FromDeploymentID string `json:"fromDeploymentId"` // the deployment it was quarantined on
	Force            bool   `json:"force"`
	EventSeq         uint64 `json:"eventSeq"` // seq of session.retried
	Revision         uint64 `json:"revision"` // the record's revision after the retry
	WakeOutcome      string `json:"wakeOutcome"`
	WakeProcess      string `json:"wakeProcess"`
	WakeError        string `json:"wakeError,omitempty"`
}

// Ended answers POST /v1/admin/sessions/{id}/end.
type Ended struct {
	SessionID    string   `json:"sessionId"`
	DeploymentID string   `json:"deploymentId"`
	Reason       string   `json:"reason"`   // terminated
	EventSeq     uint64   `json:"eventSeq"` // seq of session.ended
	Revision     uint64   `json:"revision"`
	Tombstoned   []string `json:"tombstoned"` // the addresses now answered 410
	// ChildrenEnded are the child sessions sent `end` (the session's open
	// handles; docs/runtime.md, R13).
	ChildrenEnded []string `json:"childrenEnded,omitempty"`
}

func (s *Server) httpRetry(w http.ResponseWriter, r *http.Request) error {
	id, v, _, err := s.parseAdmin(w, r, adminRetryKeys)
	if err != nil {
		return err
	}
	target := ""
	if v.DeploymentID != nil {
		if target = *v.DeploymentID; subjects.ValidateDeployment(target) != nil {
			return invalidDeployment(target, subjects.ValidateDeployment(target))
		}
	}
	out, err := s.Retry(r.Context(), id, target, v.Force != nil && *v.Force)
	if err != nil {
		return err
	}
	s.log.Warn("admin: retry of a quarantined session", "session", id, "from", out.FromDeploymentID, "to", out.DeploymentID,
		"force", out.Force, "wake", out.WakeOutcome, "wake_error", out.WakeError)
	return writeJSON(w, http.StatusOK, out)
}

func (s *Server) httpEnd(w http.ResponseWriter, r *http.Request) error {
	id, _, _, err := s.parseAdmin(w, r, nil)
	if err != nil {
		return err
	}
	out, err := s.End(r.Context(), id)
	if err != nil {
		return err
	}
	s.log.Warn("admin: end of a quarantined session", "session", id, "event_seq", out.EventSeq, "tombstoned", len(out.Tombstoned))
	return writeJSON(w, http.StatusOK, out)
}

// Retry clears a quarantined session's attempts and boots it again: on its
// own deployment (target "" or the same), or adopted by target through the
// target-driven adoption path (a live wait is cancelled only with force,
// the rule of a forced move). It refuses, writing nothing: a session that
// is not quarantined, a retired target, and without force a session whose
// checkpoint shows — or, unreadable here, may hide — a live wait.
func (s *Server) Retry(ctx context.Context, id, target string, force bool) (Retried, error) {
	a, cur, err := s.quarantined(ctx, id)
	if err != nil {
		return Retried{}, err
	}
	rec := cur.Record
	dep := or(target, rec.DeploymentID)
	if dep != rec.DeploymentID {
		if err := s.checkRetryTarget(ctx, a, rec, dep, force); err != nil {
			return Retried{}, err
		}
	}
	writer := "admin-" + ulid.Make().String()
	next, seq, err := s.operate(ctx, rec, writer, wire.EventSessionRetried, wire.SessionRetried{DeploymentID: dep},
		func(ev record.Appended) (record.SessionRecord, error) {
			return record.Retry(rec, dep, force, writer, ev)
		})
	if err != nil {
		return Retried{}, err
	}
	rev, err := s.casOperated(ctx, a, next, cur.Revision)
	if err != nil {
		return Retried{}, err
	}
	s.appendLogged(ctx, next)
	out := Retried{SessionID: id, DeploymentID: dep, FromDeploymentID: rec.DeploymentID, Force: force, EventSeq: seq, Revision: rev}
	out.WakeOutcome, out.WakeProcess, out.WakeError = s.wakeOnce(ctx, dep, id)
	return out, nil
}

// checkRetryTarget refuses a retry on another deployment that is retired,
// or, without force, of a session whose live waits would cross.
func (s *Server) checkRetryTarget(ctx context.Context, a *attached, rec record.SessionRecord, dep string, force bool) error {
	retired, err := a.store.DeploymentRetired(ctx, dep)
	switch {
	case err != nil:
		return fail(ErrUnavailable, "read deployment %s: %v", dep, err)
	case retired:
		return &Error{Err: ErrConflict, Detail: CodeTargetRetired, Message: "deployment " + dep + " is retired; retry the session elsewhere"}
	case force:
		return nil
	}
	cp, err := wire.DecodeCheckpoint(rec.Checkpoint)
	switch {
	case err != nil:
		return &Error{Err: ErrConflict, Detail: CodeWaitsPending,
			Message: "the checkpoint of session " + rec.SessionID + " cannot be read here, so its waits are unknown; retry with \"force\": true to let " + dep + " cancel any live wait"}
	case !cp.Waits.Empty() || cp.ActiveChildren() > 0:
		return &Error{Err: ErrConflict, Detail: CodeWaitsPending,
			Message: "session " + rec.SessionID + " has live waits (input, authorization, tasks or active children); retry with \"force\": true to cancel them on " + dep}
	}
	return nil
}

// End ends a quarantined session: no owner runs it, so the operator's
// write ends it (record.Terminate by CAS), session.ended {reason:
// terminated} is appended at the subject's end, its addresses are
// tombstoned (later deliveries get 410) and its timer schedule purged.
func (s *Server) End(ctx context.Context, id string) (Ended, error) {
	a, cur, err := s.quarantined(ctx, id)
	if err != nil {
		return Ended{}, err
	}
	rec := cur.Record
	writer := "admin-" + ulid.Make().String()
	ev, err := wire.NewSessionEnded(wire.EndTerminated)
	if err != nil {
		return Ended{}, fail(ErrUnavailable, "session.ended: %v", err)
	}
	next, seq, err := s.operateEvent(ctx, rec, writer, ev,
		func(ev record.Appended) (record.SessionRecord, error) { return record.Terminate(rec, writer, ev) })
	if err != nil {
		return Ended{}, err
	}
	rev, err := s.casOperated(ctx, a, next, cur.Revision)
	if err != nil {
		return Ended{}, err
	}
	s.appendLogged(ctx, next)
	out := Ended{SessionID: id, DeploymentID: rec.DeploymentID, Reason: wire.EndTerminated, EventSeq: seq, Revision: rev}
	if out.Tombstoned, err = s.tombstoneAll(ctx, a, rec); err != nil {
		return Ended{}, fail(ErrUnavailable, "session %s ended; tombstoning its addresses failed (repeat the end): %v", id, err)
	}
	if err := a.inbox.Purge(ctx, jetstream.WithPurgeSubject(s.cfg.Names.Sched(id))); err != nil {
		s.log.Warn("admin: end: purge the session's timer schedule", "session", id, "err", err)
	}
	out.ChildrenEnded = s.endFamily(ctx, a, rec)
	return out, nil
}

// quarantined reads the session's record from the stream leader and
// refuses one that is not quarantined (404, 409 not_quarantined). A
// session an operator ended already answers 409 too.
func (s *Server) quarantined(ctx context.Context, id string) (*attached, record.Session, error) {
	if err := checkSessionID(id); err != nil {
		return nil, record.Session{}, err
	}
	a, err := s.topology(ctx)
	if err != nil {
		return nil, record.Session{}, err
	}
	cur, err := a.store.LeaderSession(ctx, id)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return nil, record.Session{}, &Error{Err: ErrNotFound, Detail: CodeSessionNotFound, Message: "no session " + id}
	case err != nil:
		return nil, record.Session{}, fail(ErrUnavailable, "read session %s: %v", id, err)
	case !cur.Record.Quarantined():
		return nil, record.Session{}, &Error{Err: ErrConflict, Detail: CodeNotQuarantined,
			Message: "session " + id + " is " + string(cur.Record.State) + ", not quarantined"}
	}
	return a, cur, nil
}

// operate builds an operator transition carrying a new event of kind
// (data version 1) at the seq after the subject's end and the floor.
func (s *Server) operate(ctx context.Context, rec record.SessionRecord, writer, kind string, data any,
	transition func(record.Appended) (record.SessionRecord, error)) (record.SessionRecord, uint64, error) {
	ev, err := wire.NewEvent(kind, data)
	if err != nil {
		return record.SessionRecord{}, 0, fail(ErrUnavailable, "%s: %v", kind, err)
	}
	return s.operateEvent(ctx, rec, writer, ev, transition)
}

// operateEvent is operate for a built event.
func (s *Server) operateEvent(ctx context.Context, rec record.SessionRecord, writer string, ev wire.Event,
	transition func(record.Appended) (record.SessionRecord, error)) (record.SessionRecord, uint64, error) {
	seq, err := s.settleFloor(ctx, rec)
	if err != nil {
		return record.SessionRecord{}, 0, fail(ErrUnavailable, "read the events of %s: %v", rec.SessionID, err)
	}
	ev.SessionID, ev.Seq, ev.Time, ev.OwnerRunID, ev.DeploymentID = rec.SessionID, seq, time.Now().UTC(), writer, rec.DeploymentID
	data, err := wire.EncodeEvent(wire.DefaultEvents(), ev)
	if err != nil {
		return record.SessionRecord{}, 0, fail(ErrUnavailable, "%s: %v", ev.Kind, err)
	}
	next, err := transition(record.Appended{Seq: seq, Event: data})
	if err != nil {
		return record.SessionRecord{}, 0, fail(ErrConflict, "%v", err)
	}
	return next, seq, nil
}

// casOperated writes an operator transition at the revision read.
func (s *Server) casOperated(ctx context.Context, a *attached, rec record.SessionRecord, rev uint64) (uint64, error) {
	next, err := a.store.UpdateSession(ctx, rec, rev)
	switch {
	case errors.Is(err, record.ErrConflict):
		return 0, fail(ErrConflict, "session %s changed meanwhile (revision %d moved on); nothing was written, retry", rec.SessionID, rev)
	case err != nil:
		return 0, fail(ErrUnavailable, "write session %s: %v", rec.SessionID, err)
	}
	return next, nil
}

// appendLogged appends the floor event the record now carries; if that
// fails, the next reader of the record (an owner's wake or claim) does.
func (s *Server) appendLogged(ctx context.Context, rec record.SessionRecord) {
	if err := s.appendEvent(ctx, rec.SessionID, rec.EventSeqFloor, rec.FloorEvent); err != nil {
		s.log.Warn("admin: event not appended; the session's next owner appends it", "session", rec.SessionID, "seq", rec.EventSeqFloor, "err", err)
	}
}

// tombstoneAll tombstones every address of the session whose hook names
// it: the stable one and the checkpoint's aliases (read leniently: the
// checkpoint of a quarantined session may not decode here).
func (s *Server) tombstoneAll(ctx context.Context, a *attached, rec record.SessionRecord) ([]string, error) {
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
		h, rev, err := a.store.GetHook(ctx, tok)
		switch {
		case errors.Is(err, record.ErrNotFound) || err == nil && h.SessionID != rec.SessionID:
			continue
		case err != nil:
			return done, err
		case !h.Tombstone:
			if _, err := a.store.Tombstone(ctx, tok, rev); err != nil && !errors.Is(err, record.ErrConflict) {
				return done, err
			}
		}
		done = append(done, addr)
	}
	return done, nil
}

// wakeOnce asks dep's pool to boot the session and reports its answer.
func (s *Server) wakeOnce(ctx context.Context, dep, id string) (outcome, process, errText string) {
	data, _ := json.Marshal(protocol.WakeRequest{SessionID: id})
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	msg, err := s.cfg.NC.RequestWithContext(wctx, s.cfg.Names.Wake(dep), data)
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
