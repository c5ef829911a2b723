package ingress

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

// Agents and promotion (docs/runtime.md R10, docs/api.md "Agents"). An
// ingress serves one agent (Config.Agent). It stamps the agent's promoted
// deployment on every command it accepts, and starts new sessions there;
// with none promoted, its own deployment. It follows promotions by a KV
// watch (kv.Fleet): a promotion is stamped by every ingress of the agent
// within the watch's delay, milliseconds on a healthy connection (docs/api.md
// gives the bound); GET /v1/ingress says what it stamps now.

// Codes of the agent refusals.
const (
	CodeAgentMismatch      = "agent_mismatch"       // 409: a session, or a deployment, of another agent
	CodeUnknownAgent       = "unknown_agent"        // 404: promote for an agent no deployment belongs to
	CodeDeploymentRetired  = "deployment_retired"   // 409: create on a retired deployment with none promoted
	CodeInvalidAgent       = "invalid_agent"        // 400: not an agent name
	CodeDeploymentNotFound = "deployment_not_found" // 404: promote a deployment nobody ever ran
)

// agent is the agent this ingress serves.
func (s *Server) agent() string {
	if s.cfg.Agent == "" {
		return subjects.DefaultAgent
	}
	return s.cfg.Agent
}

// stamp is the deployment this ingress stamps now, and the promotion's
// revision (0: none promoted, it stamps its own deployment).
func (s *Server) stamp(a *attached) (string, uint64) {
	if dep, rev, ok := a.fleet.Promoted(s.agent()); ok {
		return dep, rev
	}
	return s.cfg.Deployment, 0
}

// agentMismatch refuses a command for a session of deployment dep when dep
// belongs to another agent than want.
func (s *Server) agentMismatch(ctx context.Context, a *attached, sessionID, dep, want string) error {
	have, err := a.fleet.Agent(ctx, dep)
	if err != nil {
		return fail(ErrUnavailable, "read the agent of deployment %s: %v", dep, err)
	}
	if have == want {
		return nil
	}
	return &Error{Err: ErrConflict, Detail: CodeAgentMismatch,
		Message: "session " + sessionID + " belongs to agent " + have + " (deployment " + dep + "), not agent " + want +
			"; send it through an ingress of agent " + have + " (baton.ingress." + have + ".*); nothing was written"}
}

// targetMismatch refuses moving (or retrying) a session of deployment
// from onto deployment to of another agent.
func (s *Server) targetMismatch(ctx context.Context, a *attached, sessionID, from, to string) error {
	have, err := a.fleet.Agent(ctx, from)
	if err != nil {
		return fail(ErrUnavailable, "read the agent of deployment %s: %v", from, err)
	}
	other, err := a.fleet.Agent(ctx, to)
	if err != nil {
		return fail(ErrUnavailable, "read the agent of deployment %s: %v", to, err)
	}
	if have == other {
		return nil
	}
	return &Error{Err: ErrConflict, Detail: CodeAgentMismatch,
		Message: "session " + sessionID + " belongs to agent " + have + "; deployment " + to + " belongs to agent " + other +
			": a session never leaves its agent; nothing was written"}
}

// ownerLive reports whether an owner will act on a command for a session
// of deployment dep, stamped with stamp: dep has a live owner process, or
// stamp has one and adopts dep's sessions (dep retired, or stamp is the
// promoted deployment of dep's agent).
func (s *Server) ownerLive(a *attached, dep, stamp string) bool {
	f := a.fleet
	if f.LiveOwners(dep) > 0 {
		return true
	}
	if stamp == dep || f.LiveOwners(stamp) == 0 || f.KnownAgent(dep) != f.KnownAgent(stamp) {
		return false
	}
	p, _, ok := f.Promoted(f.KnownAgent(stamp))
	return f.Retired(dep) || ok && p == stamp
}

// IngressInfo answers GET /v1/ingress: the agent this ingress serves, its
// own deployment, the deployment it stamps now, and the revision of the
// promotion it follows (0: none promoted).
type IngressInfo struct {
	Agent             string `json:"agent"`
	DeploymentID      string `json:"deploymentId"`
	Stamps            string `json:"stamps"`
	PromotionRevision uint64 `json:"promotionRevision"`
}

// Info is what GET /v1/ingress answers.
func (s *Server) Info(ctx context.Context) (IngressInfo, error) {
	a, err := s.topology(ctx)
	if err != nil {
		return IngressInfo{}, err
	}
	dep, rev := s.stamp(a)
	return IngressInfo{Agent: s.agent(), DeploymentID: s.cfg.Deployment, Stamps: dep, PromotionRevision: rev}, nil
}

func (s *Server) httpInfo(w http.ResponseWriter, r *http.Request) error {
	info, err := s.Info(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, info)
}

// Agents answers GET /v1/admin/agents.
type Agents struct {
	Agents []kv.AgentView `json:"agents"`
}

func (s *Server) httpAgents(w http.ResponseWriter, r *http.Request) error {
	a, err := s.topology(r.Context())
	if err != nil {
		return err
	}
	agents := a.fleet.Agents()
	x, err := a.sessionIndex(r.Context(), s)
	if err != nil {
		return err
	}
	var deps []string
	for _, ag := range agents {
		for _, d := range ag.Deployments {
			deps = append(deps, d.DeploymentID)
		}
	}
	counts, err := countStates(r.Context(), x, deps)
	if err != nil {
		return err
	}
	for i := range agents {
		ag := &agents[i]
		ag.Sessions = zeroStates()
		for j := range ag.Deployments {
			d := &ag.Deployments[j]
			d.Sessions = counts[d.DeploymentID]
			for st, n := range d.Sessions {
				ag.Sessions[st] += n
			}
		}
	}
	return writeJSON(w, http.StatusOK, Agents{Agents: agents})
}

// Promoted answers POST /v1/admin/agents/{agent}/promote.
type Promoted struct {
	Agent    string `json:"agent"`
	Promoted string `json:"promoted"`
	Previous string `json:"previous"`
	Revision uint64 `json:"revision"`
}

func (s *Server) httpPromote(w http.ResponseWriter, r *http.Request) error {
	agent := r.PathValue("agent")
	if err := subjects.ValidateAgent(agent); err != nil {
		return &Error{Err: ErrBadRequest, Detail: CodeInvalidAgent, Message: "agent " + strconv.Quote(clip(agent)) + ": " + err.Error()}
	}
	b, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	var v struct {
		DeploymentID *string `json:"deploymentId"`
	}
	if err := decodeStrict(b, &v, []string{"deploymentId"}); err != nil {
		return bad("%v", err)
	}
	if v.DeploymentID == nil {
		return bad("deploymentId is required")
	}
	dep := *v.DeploymentID
	if err := subjects.ValidateDeployment(dep); err != nil {
		return invalidDeployment(dep, err)
	}
	out, err := s.Promote(r.Context(), agent, dep)
	if err != nil {
		return err
	}
	s.log.Info("admin: promote", "agent", agent, "promoted", out.Promoted, "previous", out.Previous, "revision", out.Revision)
	return writeJSON(w, http.StatusOK, out)
}

// Promote makes dep the promoted deployment of agent: every ingress of the
// agent stamps it from then on. It refuses, writing nothing: an agent no
// deployment belongs to (404 unknown_agent), a deployment nobody ever ran
// (404 deployment_not_found), one of another agent (409 agent_mismatch) or
// a retired one (409 target_retired).
func (s *Server) Promote(ctx context.Context, agent, dep string) (Promoted, error) {
	a, err := s.topology(ctx)
	if err != nil {
		return Promoted{}, err
	}
	known := false
	for _, v := range a.fleet.Agents() {
		known = known || v.Agent == agent
	}
	if !known {
		return Promoted{}, &Error{Err: ErrNotFound, Detail: CodeUnknownAgent,
			Message: "no deployment belongs to agent " + agent + " (start an owner with --agent-name " + agent + ")"}
	}
	have, err := a.store.AgentOf(ctx, dep)
	if err != nil {
		return Promoted{}, fail(ErrUnavailable, "read the agent of deployment %s: %v", dep, err)
	}
	if have != agent {
		return Promoted{}, &Error{Err: ErrConflict, Detail: CodeAgentMismatch,
			Message: "deployment " + dep + " belongs to agent " + have + ", not " + agent + "; nothing was written"}
	}
	// A deployment without a record has never run an owner — unless its
	// live owners run a build from before owners advertised (a rollback
	// to it is a promotion like any other).
	if _, err := a.store.DeploymentReads(ctx, dep); errors.Is(err, record.ErrNotFound) && a.fleet.LiveOwners(dep) == 0 {
		return Promoted{}, &Error{Err: ErrNotFound, Detail: CodeDeploymentNotFound,
			Message: "deployment " + dep + " has never run an owner; start it before promoting it"}
	}
	if retired, err := a.store.DeploymentRetired(ctx, dep); err != nil {
		return Promoted{}, fail(ErrUnavailable, "read deployment %s: %v", dep, err)
	} else if retired {
		return Promoted{}, &Error{Err: ErrConflict, Detail: CodeTargetRetired,
			Message: "deployment " + dep + " is retired; un-retire it (POST /v1/admin/deployments/" + dep + "/unretire) or promote another"}
	}
	p, rev, err := a.store.Promote(ctx, agent, dep)
	if err != nil {
		return Promoted{}, fail(ErrUnavailable, "promote %s: %v", dep, err)
	}
	return Promoted{Agent: agent, Promoted: p.DeploymentID, Previous: p.Previous, Revision: rev}, nil
}

// Unretired answers POST /v1/admin/deployments/{dep}/unretire.
type Unretired struct {
	DeploymentID string `json:"deploymentId"`
	Retired      bool   `json:"retired"`
	Changed      bool   `json:"changed"` // false: it was not retired
}

func (s *Server) httpUnretire(w http.ResponseWriter, r *http.Request) error {
	dep, a, err := s.deploymentRoute(w, r)
	if err != nil {
		return err
	}
	d, changed, err := a.store.UnretireDeployment(r.Context(), dep)
	if err != nil {
		return fail(ErrUnavailable, "un-retire %s: %v", dep, err)
	}
	s.log.Info("admin: unretire", "target", dep, "changed", changed)
	return writeJSON(w, http.StatusOK, Unretired{DeploymentID: dep, Retired: d.Retired, Changed: changed})
}
