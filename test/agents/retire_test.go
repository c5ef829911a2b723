package agents

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
)

// A retired deployment stays retired, and a receipt says whether an owner
// will act. Agent solo (deployment q1, nothing promoted): with q1's owner
// stopped a delivery is accepted with ownerLive false (and applied once an
// owner runs again). Agent ret (r1, r2): with r2 promoted and r1 retired
// and stopped, an owner of r1 refuses to start, r1's ingress stamps r2 and
// creates sessions there, and a session left on r1 is adopted by r2 at its
// next delivery; once r1 is un-retired its owner starts.
func TestRetiredDeploymentIsEnforced(t *testing.T) {
	began := time.Now()
	w := newWorld(t)
	w.ownerLiveFollowsOwner()
	w.retiredStaysRetired()
	t.Logf("done in %s", time.Since(began).Round(time.Millisecond))
}

// ownerLiveFollowsOwner: a receipt's and a status's ownerLive, and the
// admin view's ownersLive, follow q1's owner process.
func (w *world) ownerLiveFollowsOwner() {
	w.t.Helper()
	owner := w.owner("solo", "q1", "q1-1")
	q1 := w.ingress("solo", "q1", "ingress q1")
	c := w.create(q1, "hello q1")
	w.waitDone(c.SessionID, c.Seq)
	r := w.accepted(q1, c.SessionID, "owner running")
	if r.DeploymentID != "q1" || !r.OwnerLive {
		w.t.Fatalf("receipt with q1's owner running: %+v, want deploymentId q1, ownerLive true", r)
	}
	w.waitDone(c.SessionID, r.Seq)
	if v, ok := deploymentView(w.agents(q1), "solo", "q1"); !ok || v.OwnersLive != 1 || v.Retired || v.Promoted != "" {
		w.t.Fatalf("GET /v1/admin/agents: solo/q1 %+v (found %v), want 1 live owner, not retired, none promoted", v, ok)
	}

	w.h.Terminate("owner q1-1", owner, wait)
	w.h.Eventually(wait, "q1 shown without a live owner", func() bool {
		v, ok := deploymentView(w.agents(q1), "solo", "q1")
		return ok && v.OwnersLive == 0
	})
	r = w.accepted(q1, c.SessionID, "owner stopped")
	if r.DeploymentID != "q1" || r.OwnerLive {
		w.t.Fatalf("receipt with q1's owner stopped: %+v, want deploymentId q1, ownerLive false", r)
	}
	if s := w.status(q1, c.SessionID); s.OwnerLive || s.DeploymentID != "q1" {
		w.t.Fatalf("status with q1's owner stopped: ownerLive %v on %s", s.OwnerLive, s.DeploymentID)
	}
	w.t.Logf("q1's owner stopped: receipt %+v", r)

	// The command waited in the inbox: an owner of q1 applies it.
	w.owner("solo", "q1", "q1-2")
	w.waitDone(c.SessionID, r.Seq)
	w.h.Eventually(wait, "ownerLive again", func() bool { return w.status(q1, c.SessionID).OwnerLive })
	if r := w.accepted(q1, c.SessionID, "owner back"); !r.OwnerLive {
		w.t.Fatalf("receipt with q1's owner back: %+v, want ownerLive true", r)
	}
}

// retiredStaysRetired is the agent ret part: promote r2, retire and stop
// r1, then everything that must not bring r1 back.
func (w *world) retiredStaysRetired() {
	w.t.Helper()
	r1Owner := w.owner("ret", "r1", "r1-1")
	w.owner("ret", "r2", "r2-1")
	r1 := w.ingress("ret", "r1", "ingress r1")
	r2 := w.ingress("ret", "r2", "ingress r2")
	left := w.create(r1, "before the retirement")
	if left.DeploymentID != "r1" {
		w.t.Fatalf("created on %s before any promotion, want r1", left.DeploymentID)
	}
	w.waitDone(left.SessionID, left.Seq)

	w.promotionRefusals(r1)
	p := w.promoted(r1, "ret", "r2")
	w.waitStamps(p.Revision, "r2", r1, r2)
	code, b := w.call(http.MethodPost, r1+"/v1/admin/deployments/r1/retire", nil, true)
	w.want("retire r1", code, b, http.StatusOK, nil)
	code, b = w.promote(r1, "ret", "r1")
	w.wantError("promote retired r1", code, b, http.StatusConflict, "target_retired")
	w.h.Terminate("owner r1-1", r1Owner, wait)
	w.onDeployment(left.SessionID, "r1")

	w.ownerRefusesRetired("r1", "r1-2")
	if i := w.info(r1); i.Agent != "ret" || i.DeploymentID != "r1" || i.Stamps != "r2" || i.PromotionRevision != p.Revision {
		w.t.Fatalf("GET /v1/ingress of r1's ingress: %+v, want agent ret, deployment r1, stamps r2 at revision %d", i, p.Revision)
	}
	c := w.create(r1, "after the retirement")
	if c.DeploymentID != "r2" {
		w.t.Fatalf("created through r1's ingress on %s, want r2", c.DeploymentID)
	}
	w.waitDone(c.SessionID, c.Seq)
	w.onDeployment(c.SessionID, "r2")
	w.adoptedAtNextDelivery(r1, left.SessionID)

	code, b = w.call(http.MethodPost, r1+"/v1/admin/deployments/r1/unretire", nil, true)
	var u ingress.Unretired
	w.want("unretire r1", code, b, http.StatusOK, &u)
	if u.Retired || !u.Changed {
		w.t.Fatalf("unretire r1: %s", b)
	}
	w.owner("ret", "r1", "r1-3")
	w.h.Eventually(wait, "r1 shown live and not retired", func() bool {
		v, ok := deploymentView(w.agents(r2), "ret", "r1")
		return ok && !v.Retired && v.OwnersLive == 1 && v.Promoted == "r2"
	})
}

// promotionRefusals: promote refuses an unknown agent (404 unknown_agent)
// and another agent's deployment (409 agent_mismatch).
func (w *world) promotionRefusals(base string) {
	w.t.Helper()
	code, b := w.promote(base, "nobody", "r2")
	w.wantError("promote for an unknown agent", code, b, http.StatusNotFound, "unknown_agent")
	code, b = w.promote(base, "ret", "q1")
	w.wantError("promote solo's q1 for ret", code, b, http.StatusConflict, "agent_mismatch")
}

// ownerRefusesRetired starts an owner of retired deployment dep: it exits 1
// at start, its stderr naming dep and the unretire route.
func (w *world) ownerRefusesRetired(dep, pid string) {
	w.t.Helper()
	p := w.procs.Start(w.t, "owner "+pid, w.ownerBin, w.ownerArgs("ret", dep, pid)...)
	w.h.Eventually(wait, "the owner of retired "+dep+" exits or serves", func() bool {
		return p.ExitCode() != -1 || p.Contains(`"msg":"owner serving"`)
	})
	code, out := p.ExitCode(), p.Output()
	route := "/v1/admin/deployments/" + dep + "/unretire"
	if code != 1 || !strings.Contains(out, "deployment "+dep+" is retired") || !strings.Contains(out, route) {
		w.t.Fatalf("owner of retired %s: exit %d, want 1 naming %s and %s; stderr:\n%s", dep, code, dep, route, harness.LastLines(out, 20))
	}
	if strings.Contains(out, `"msg":"owner serving"`) {
		w.t.Fatalf("owner of retired %s served before exiting:\n%s", dep, harness.LastLines(out, 20))
	}
	w.t.Logf("owner of retired %s: exit %d; %s", dep, code, harness.LastLines(out, 1))
}

// adoptedAtNextDelivery: a session left on retired r1 (no owner) is
// accepted stamped r2 with ownerLive true, adopted by r2 (handoff.completed
// r1→r2) and answered there.
func (w *world) adoptedAtNextDelivery(r1, sid string) {
	w.t.Helper()
	if s := w.status(r1, sid); s.DeploymentID != "r1" || !s.OwnerLive {
		w.t.Fatalf("status of the session left on r1: on %s ownerLive %v, want r1 and true (r2 adopts it)", s.DeploymentID, s.OwnerLive)
	}
	r := w.accepted(r1, sid, "adopt me")
	if r.DeploymentID != "r2" || !r.OwnerLive {
		w.t.Fatalf("receipt for the session left on r1: %+v, want deploymentId r2, ownerLive true", r)
	}
	w.waitDone(sid, r.Seq)
	hs := w.handoffs(sid)
	if len(hs) != 1 || hs[0].FromDeploymentID != "r1" || hs[0].ToDeploymentID != "r2" {
		w.t.Fatalf("handoffs of the session left on r1: [%s], want [r1→r2]", route(hs))
	}
	if s := w.status(r1, sid); s.DeploymentID != "r2" {
		w.t.Fatalf("status after the adoption: on %s, want r2", s.DeploymentID)
	}
	w.onDeployment(sid, "r2")
	if !harness.OutputCommitted("adopt me")(w.events(sid)) {
		w.t.Fatalf("no answer to %q: %s", "adopt me", harness.Trace(w.events(sid)))
	}
}
