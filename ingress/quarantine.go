package ingress

import (
	"cmp"
	"context"
	"errors"
	"net/http"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// The way out of a quarantine (docs/api.md, "Quarantine"): an operator
// retries the session — on its own deployment or on another one, which
// adopts it — or ends it. The ingress writes the request into the record
// (kv.Store.RequestFinish: no run of a quarantined session is live) and an
// owner carries it out (finish.go); the ingress appends no event and
// writes no other part of the session's state.

// Codes of the quarantine routes (409).
const (
	CodeNotQuarantined = "not_quarantined" // retry or end of a session that is not quarantined
	CodeWaitsPending   = "waits_pending"   // retry on another deployment of a session with live waits, without force
	CodeFinishPending  = "finish_pending"  // an end while a retry is pending, or the reverse
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
	out, pending, err := s.Retry(r.Context(), id, target, v.Force != nil && *v.Force)
	if err != nil || pending {
		return s.writePending(w, id, "retry", err)
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
	out, pending, err := s.End(r.Context(), id)
	if err != nil || pending {
		return s.writePending(w, id, "end", err)
	}
	s.log.Warn("admin: end of a quarantined session", "session", id, "event_seq", out.EventSeq, "tombstoned", len(out.Tombstoned))
	return writeJSON(w, http.StatusOK, out)
}

// Retry asks an owner to clear a quarantined session's attempts and boot
// it again: on its own deployment (target "" or the same), or adopted by
// target through the target-driven adoption path (a live wait is
// cancelled only with force, the rule of a forced move). It refuses,
// writing nothing: a session that is not quarantined, a retired target,
// and without force a session whose checkpoint shows — or, unreadable
// here, may hide — a live wait. pending: no owner carried the retry out
// within Config.FinishWait; one does when it runs.
func (s *Server) Retry(ctx context.Context, id, target string, force bool) (Retried, bool, error) {
	a, cur, err := s.quarantined(ctx, id)
	if err != nil {
		return Retried{}, false, err
	}
	rec := cur.Record
	dep := cmp.Or(target, rec.DeploymentID)
	if dep != rec.DeploymentID {
		if err := s.checkRetryTarget(ctx, a, rec, dep, force); err != nil {
			return Retried{}, false, err
		}
	}
	rep, pending, err := s.requestFinish(ctx, a, cur, record.FinishRequest{Op: record.FinishRetry, DeploymentID: dep, Force: force})
	if err != nil || pending {
		return Retried{}, pending, err
	}
	return Retried{SessionID: id, DeploymentID: rep.DeploymentID, FromDeploymentID: rep.FromDeploymentID, Force: rep.Force,
		EventSeq: rep.EventSeq, Revision: rep.Revision, WakeOutcome: rep.WakeOutcome, WakeProcess: rep.WakeProcess, WakeError: rep.WakeError}, false, nil
}

// End asks an owner to end a quarantined session: session.ended {reason:
// terminated} appended at the subject's end, its addresses tombstoned
// (later deliveries get 410), its timer schedule purged and its family
// told. pending: no owner carried the end out within Config.FinishWait;
// one does when it runs.
func (s *Server) End(ctx context.Context, id string) (Ended, bool, error) {
	a, cur, err := s.quarantined(ctx, id)
	if err != nil {
		return Ended{}, false, err
	}
	rep, pending, err := s.requestFinish(ctx, a, cur, record.FinishRequest{Op: record.FinishEnd, EndedBy: record.EndedByAdmin})
	if err != nil || pending {
		return Ended{}, pending, err
	}
	return Ended{SessionID: id, DeploymentID: rep.DeploymentID, Reason: wire.EndTerminated, EventSeq: rep.EventSeq,
		Revision: rep.Revision, Tombstoned: orEmpty(rep.Tombstoned), ChildrenEnded: rep.ChildrenEnded}, false, nil
}

// checkRetryTarget refuses a retry on another deployment that is retired,
// or, without force, of a session whose live waits would cross.
func (s *Server) checkRetryTarget(ctx context.Context, a *attached, rec record.SessionRecord, dep string, force bool) error {
	if err := s.targetMismatch(ctx, a, rec.SessionID, rec.DeploymentID, dep); err != nil {
		return err
	}
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
