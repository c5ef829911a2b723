package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// The admin routes (docs/api.md, docs/api.md "Admin routes"): operator
// controls over sessions and deployments, behind --admin-token-file. Their
// refusals carry finer codes than the user routes (Error.Detail), each with
// the status of its base code.
const (
	CodeAdminDisabled     = "admin_disabled"      // 403: no admin tokens configured
	CodeSessionNotFound   = "session_not_found"   // 404
	CodeSessionEnded      = "session_ended"       // 410
	CodeInvalidDeployment = "invalid_deployment"  // 400
	CodeNotRetired        = "not_retired"         // 409: force on a session of a deployment that is not retired
	CodeSameDeployment    = "same_deployment"     // 409: move to the session's own deployment
	CodeTargetRetired     = "target_retired"      // 409: move to a retired deployment
	CodeHandoffInProgress = "handoff_in_progress" // 409: release of a session mid-handoff
	CodeQuarantined       = "quarantined"         // 409: release of a quarantined session (retry or end it)
)

// Bounds of the drain report page.
const (
	DefaultReportLimit = 500
	MaxReportLimit     = 5000
)

// adminCaller is the caller stamped on operator commands without one.
const adminCaller = "admin"

// releaseWakes bounds the wake requests a release sends (see Release).
const releaseWakes = 5

func (s *Server) adminRoutes(mux *http.ServeMux) {
	s.route(mux, "GET /v1/admin/deployments", s.admin(s.httpDrainReport))
	s.route(mux, "POST /v1/admin/deployments/{dep}/retire", s.admin(s.httpRetire))
	s.route(mux, "POST /v1/admin/deployments/{dep}/unretire", s.admin(s.httpUnretire))
	s.route(mux, "GET /v1/admin/agents", s.admin(s.httpAgents))
	s.route(mux, "POST /v1/admin/agents/{agent}/promote", s.admin(s.httpPromote))
	s.route(mux, "POST /v1/admin/sessions/{id}/move", s.admin(s.httpMove))
	s.route(mux, "POST /v1/admin/sessions/{id}/pause", s.admin(s.httpPauseResume(wire.KindPause)))
	s.route(mux, "POST /v1/admin/sessions/{id}/resume", s.admin(s.httpPauseResume(wire.KindResume)))
	s.route(mux, "POST /v1/admin/sessions/{id}/release", s.admin(s.httpRelease))
	s.quarantineRoutes(mux)
	s.sessionRoutes(mux)
	s.route(mux, "/v1/admin/", s.admin(noRoute(mux, "admin route")))
}

// detail sets the finer admin code of a refusal by its sentinel: codes maps
// a sentinel to the code; other refusals keep their base code.
func detail(err error, codes map[error]string) error {
	e := asError(err)
	for sentinel, code := range codes {
		if e.Err == sentinel && e.Detail == "" {
			return &Error{Err: e.Err, Message: e.Message, Detail: code}
		}
	}
	return e
}

// sessionCodes are the finer codes of a command to a session.
var sessionCodes = map[error]string{ErrNotFound: CodeSessionNotFound, ErrGone: CodeSessionEnded}

func invalidDeployment(dep string, err error) *Error {
	return &Error{Err: ErrBadRequest, Detail: CodeInvalidDeployment,
		Message: "deployment " + strconv.Quote(clip(dep)) + " is not a deployment ID ([A-Za-z0-9_-]{1,64}, not \"latest\"): " + err.Error()}
}

// adminBody is the union of the admin request members.
type adminBody struct {
	DeploymentID   *string `json:"deploymentId"`
	Deployment     *string `json:"deployment"`
	Force          *bool   `json:"force"`
	Caller         *string `json:"caller"`
	IdempotencyKey *string `json:"idempotencyKey"`
}

var (
	adminControlKeys = []string{"caller", "idempotencyKey"}
	adminMoveKeys    = []string{"deploymentId", "deployment", "force", "caller", "idempotencyKey"}
)

// parseAdmin parses an admin body (empty = {}) for the session of the path.
func (s *Server) parseAdmin(w http.ResponseWriter, r *http.Request, keys []string) (string, adminBody, Request, error) {
	var v adminBody
	id := r.PathValue("id")
	if err := checkSessionID(id); err != nil {
		return "", v, Request{}, err
	}
	b, err := s.readBody(w, r)
	if err != nil {
		return "", v, Request{}, err
	}
	if len(b) > 0 {
		if err := decodeStrict(b, &v, keys); err != nil {
			return "", v, Request{}, bad("%v", err)
		}
	}
	req := Request{SessionID: id, Caller: adminCaller}
	if v.Caller != nil {
		if err := checkKey("caller", *v.Caller); err != nil {
			return "", v, Request{}, err
		}
		req.Caller = *v.Caller
	}
	if v.IdempotencyKey != nil {
		if err := checkKey("idempotencyKey", *v.IdempotencyKey); err != nil {
			return "", v, Request{}, err
		}
		req.IdempotencyKey = *v.IdempotencyKey
	}
	return id, v, req, nil
}

func (s *Server) httpPauseResume(kind wire.Kind) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		_, _, req, err := s.parseAdmin(w, r, adminControlKeys)
		if err != nil {
			return err
		}
		req.Kind = kind
		rc, err := s.Send(r.Context(), req)
		if err != nil {
			return detail(err, sessionCodes)
		}
		s.log.Info("admin: "+string(kind), "session", req.SessionID, "seq", rc.Seq, "caller", req.Caller)
		return writeJSON(w, http.StatusAccepted, rc)
	}
}

// MoveReceipt answers POST /v1/admin/sessions/{id}/move: the command's
// receipt, the deployment it asks for and the one the session was on.
type MoveReceipt struct {
	Receipt
	TargetDeploymentID string `json:"targetDeploymentId"`
	FromDeploymentID   string `json:"fromDeploymentId"`
	Force              bool   `json:"force"`
}

func (s *Server) httpMove(w http.ResponseWriter, r *http.Request) error {
	id, v, req, err := s.parseAdmin(w, r, adminMoveKeys)
	if err != nil {
		return err
	}
	var dep string
	switch {
	case v.DeploymentID != nil && v.Deployment != nil:
		return bad("give exactly one of deploymentId and deployment, not both")
	case v.DeploymentID != nil:
		dep = *v.DeploymentID
	case v.Deployment != nil:
		dep = *v.Deployment
	default:
		return bad("deploymentId is required")
	}
	if err := subjects.ValidateDeployment(dep); err != nil {
		return invalidDeployment(dep, err)
	}
	force := v.Force != nil && *v.Force
	req.Kind, req.Move = wire.KindMove, &wire.Move{DeploymentID: dep, Force: force}
	out, err := s.Move(r.Context(), req)
	if err != nil {
		return err
	}
	s.log.Info("admin: move", "session", id, "from", out.FromDeploymentID, "to", dep, "force", force, "seq", out.Seq, "caller", req.Caller)
	return writeJSON(w, http.StatusAccepted, out)
}

// Move publishes an operator move command (req.Move) to the session's
// inbox, the path of every command: the owner applies the idle rule and the
// handoff transaction (docs/runtime.md, docs/handoff.md), or records handoff.skipped. It
// refuses, writing nothing: a move to the session's own deployment or to a
// retired one, a session of another agent than this ingress's or a move
// to another agent's deployment, and force unless the session's
// deployment is retired.
func (s *Server) Move(ctx context.Context, req Request) (MoveReceipt, error) {
	a, err := s.topology(ctx)
	if err != nil {
		return MoveReceipt{}, err
	}
	cmd, data, err := s.prepare(a, &req)
	if err != nil {
		return MoveReceipt{}, err
	}
	t, err := s.resolveID(ctx, a, &req)
	if err != nil {
		return MoveReceipt{}, detail(err, sessionCodes)
	}
	to := req.Move.DeploymentID
	if t.deployment == to {
		return MoveReceipt{}, &Error{Err: ErrConflict, Detail: CodeSameDeployment,
			Message: "session " + req.SessionID + " is already on deployment " + to}
	}
	if err := s.agentMismatch(ctx, a, req.SessionID, t.deployment, s.agent()); err != nil {
		return MoveReceipt{}, err
	}
	if err := s.targetMismatch(ctx, a, req.SessionID, t.deployment, to); err != nil {
		return MoveReceipt{}, err
	}
	if retired, err := a.store.DeploymentRetired(ctx, to); err != nil {
		return MoveReceipt{}, fail(ErrUnavailable, "read deployment %s: %v", to, err)
	} else if retired {
		return MoveReceipt{}, &Error{Err: ErrConflict, Detail: CodeTargetRetired,
			Message: "deployment " + to + " is retired; move the session elsewhere"}
	}
	if req.Move.Force {
		retired, err := a.store.DeploymentRetired(ctx, t.deployment)
		if err != nil {
			return MoveReceipt{}, fail(ErrUnavailable, "read deployment %s: %v", t.deployment, err)
		}
		if !retired {
			return MoveReceipt{}, &Error{Err: ErrConflict, Detail: CodeNotRetired,
				Message: "force is only accepted for a session of a retired deployment; " + t.deployment + " is not retired (POST /v1/admin/deployments/" + t.deployment + "/retire first)"}
		}
	}
	start := time.Now()
	rc, err := s.publish(ctx, a, t, cmd, data)
	if err != nil {
		return MoveReceipt{}, err
	}
	s.met.command.WithLabelValues(string(cmd.Kind)).Observe(time.Since(start).Seconds())
	return MoveReceipt{Receipt: rc, TargetDeploymentID: to, FromDeploymentID: t.deployment, Force: req.Move.Force}, nil
}

// deploymentRoute reads the deployment of a /v1/admin/deployments/{dep}/…
// route, whose body must be empty or {}, and attaches to the topology.
func (s *Server) deploymentRoute(w http.ResponseWriter, r *http.Request) (string, *attached, error) {
	dep := r.PathValue("dep")
	if err := subjects.ValidateDeployment(dep); err != nil {
		return "", nil, invalidDeployment(dep, err)
	}
	b, err := s.readBody(w, r)
	if err != nil {
		return "", nil, err
	}
	if len(b) > 0 {
		var v struct{}
		if err := decodeStrict(b, &v, nil); err != nil {
			return "", nil, bad("%v", err)
		}
	}
	a, err := s.topology(r.Context())
	return dep, a, err
}

// Retired answers POST /v1/admin/deployments/{dep}/retire.
type Retired struct {
	DeploymentID string    `json:"deploymentId"`
	Retired      bool      `json:"retired"`
	RetiredAt    time.Time `json:"retiredAt"`
	Changed      bool      `json:"changed"` // false: it was retired already
}

func (s *Server) httpRetire(w http.ResponseWriter, r *http.Request) error {
	dep, a, err := s.deploymentRoute(w, r)
	if err != nil {
		return err
	}
	d, changed, err := a.store.RetireDeployment(r.Context(), dep)
	if errors.Is(err, record.ErrInvalid) {
		return invalidDeployment(dep, err)
	}
	if err != nil {
		return fail(ErrUnavailable, "retire %s: %v", dep, err)
	}
	s.log.Info("admin: retire", "target", dep, "changed", changed)
	return writeJSON(w, http.StatusOK, Retired{DeploymentID: d.ID, Retired: d.Retired, RetiredAt: d.RetiredAt, Changed: changed})
}

// Released answers POST /v1/admin/sessions/{id}/release.
type Released struct {
	SessionID    string `json:"sessionId"`
	DeploymentID string `json:"deploymentId"`
	Epoch        uint64 `json:"epoch"`       // the epoch released (the claimer takes epoch+1)
	FromProcess  string `json:"fromProcess"` // the owner process whose claim was cleared
	Revision     uint64 `json:"revision"`    // the record's revision after the release
	WakeOutcome  string `json:"wakeOutcome"` // the pool's answer (protocol.Wake*), "" if none answered
	WakeProcess  string `json:"wakeProcess"` // the process that runs the session, when known
	WakeError    string `json:"wakeError,omitempty"`
}

func (s *Server) httpRelease(w http.ResponseWriter, r *http.Request) error {
	id, _, req, err := s.parseAdmin(w, r, adminControlKeys)
	if err != nil {
		return err
	}
	out, err := s.Release(r.Context(), id)
	if err != nil {
		return err
	}
	s.log.Warn("admin: release", "session", id, "from_process", out.FromProcess, "epoch", out.Epoch,
		"wake", out.WakeOutcome, "wake_process", out.WakeProcess, "caller", req.Caller)
	return writeJSON(w, http.StatusOK, out)
}

// Release is a fenced takeover of a wedged session (docs/api.md): a CAS of
// the session record, at the revision read from the stream leader, that
// clears OwnerProcess and OwnerRunID and stamps a new writer; then the old
// run's inbox consumer is deleted and wake requests go to the session's
// deployment pool, so a process of the pool claims it (an empty
// OwnerProcess is claimable by any of them: epoch+1, a new inbox consumer,
// the old consumer deleted). The old owner is fenced by the revision: its
// next commit CAS fails and it stops without side effects, as on any lost
// claim; a commit in flight that lands first makes the release CAS lose
// (409 conflict, nothing written; retry).
//
// A wake answered "running" by the released process itself (it has not
// yet noticed and still has the session loaded) is retried, up to releaseWakes times, since the pool
// is a queue group and another member may answer. It never touches leases.
func (s *Server) Release(ctx context.Context, id string) (Released, error) {
	a, err := s.topology(ctx)
	if err != nil {
		return Released{}, err
	}
	cur, err := a.store.LeaderSession(ctx, id)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return Released{}, &Error{Err: ErrNotFound, Detail: CodeSessionNotFound, Message: "no session " + id}
	case err != nil:
		return Released{}, fail(ErrUnavailable, "read session %s: %v", id, err)
	}
	switch cur.Record.State {
	case record.StateEnded:
		return Released{}, &Error{Err: ErrGone, Detail: CodeSessionEnded, Message: "session " + id + " has ended"}
	case record.StateHandoff:
		return Released{}, &Error{Err: ErrConflict, Detail: CodeHandoffInProgress,
			Message: "session " + id + " is mid-handoff; the handoff transaction settles it (retry later)"}
	case record.StateQuarantined:
		return Released{}, &Error{Err: ErrConflict, Detail: CodeQuarantined,
			Message: "session " + id + " is quarantined: no owner holds it; retry it (POST /v1/admin/sessions/" + id + "/retry) or end it"}
	}
	rec, err := record.Release(cur.Record, "release-"+ulid.Make().String())
	if err != nil {
		return Released{}, fail(ErrConflict, "%v", err)
	}
	out := Released{SessionID: id, DeploymentID: rec.DeploymentID, Epoch: rec.Epoch, FromProcess: cur.Record.OwnerProcess}
	oldConsumer := rec.Consumer
	rev, err := a.store.UpdateSession(ctx, rec, cur.Revision)
	switch {
	case errors.Is(err, record.ErrConflict):
		return Released{}, fail(ErrConflict, "session %s changed while it was released (revision %d moved on); nothing was written, retry", id, cur.Revision)
	case err != nil:
		return Released{}, fail(ErrUnavailable, "release session %s: %v", id, err)
	}
	out.Revision = rev
	// Deleting the old run's inbox consumer makes a live old owner notice
	// now: its consumer recovery reads the record, finds another run (none)
	// and stops without side effects, so it no longer answers wakes for
	// the session as "running". The claimer would delete it anyway.
	if oldConsumer != "" {
		err := s.cfg.JS.DeleteConsumer(ctx, s.cfg.Names.InboxStream(), oldConsumer)
		if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			s.log.Warn("admin: release: delete the old inbox consumer", "session", id, "consumer", oldConsumer, "err", err)
		}
	}
	s.wakeRelease(ctx, &out)
	return out, nil
}

// wakeRelease asks the deployment's pool to claim a released session.
func (s *Server) wakeRelease(ctx context.Context, out *Released) {
	data, _ := json.Marshal(protocol.WakeRequest{SessionID: out.SessionID})
	subject := s.cfg.Names.Wake(out.DeploymentID)
	for i := range releaseWakes {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		msg, err := s.cfg.NC.RequestWithContext(wctx, subject, data)
		cancel()
		if errors.Is(err, nats.ErrNoResponders) {
			out.WakeError = "no owner of deployment " + out.DeploymentID + " is running; the session is claimed by the next wake"
			return
		}
		if err != nil {
			out.WakeError = err.Error()
			continue
		}
		var rep protocol.WakeReply
		if err := json.Unmarshal(msg.Data, &rep); err != nil {
			out.WakeError = "wake reply: " + err.Error()
			continue
		}
		out.WakeOutcome, out.WakeProcess, out.WakeError = string(rep.Outcome), rep.ProcessID, ""
		if rep.Error != nil {
			out.WakeError = rep.Error.Error()
			continue
		}
		if rep.Outcome == protocol.WakeRunning && rep.ProcessID == out.FromProcess && out.FromProcess != "" && i+1 < releaseWakes {
			select { // the released process still has it loaded: ask again
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		return
	}
}
