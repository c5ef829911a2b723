package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/proctest"
)

const (
	// leaseTTL is the owners' lease TTL: long enough that a process on a
	// busy two-core machine never misses a renewal; a stopped owner
	// releases its lease at once (SIGTERM), so nothing waits for it.
	leaseTTL = 5 * time.Second
	// wait bounds every poll: generous, for two cores shared with other
	// packages' tests.
	wait = 60 * time.Second
	// adminToken is the token in the ingresses' --admin-token-file.
	adminToken = "op-agents"
)

// world is one embedded nats-server with Baton's topology (harness.Env:
// NC, JS, Store, Names), a tail of every session's events, and the
// bin/owner and bin/ingress processes a test starts against it.
type world struct {
	*harness.Env
	t          *testing.T
	h          harness.T
	srv        *harness.Server
	ownerBin   string
	ingressBin string
	logs       string // the owners' execution logs
	adminFile  string
	procs      *harness.Procs
	tail       *harness.Tail
	client     harness.Client
}

func newWorld(t *testing.T) *world {
	t.Helper()
	h := harness.For(t)
	w := &world{t: t, h: h, logs: t.TempDir(), client: harness.Client{HTTP: &http.Client{Timeout: 30 * time.Second}}}
	w.ownerBin = proctest.BuildNoRace(t, harness.OwnerPkg)
	w.ingressBin = proctest.BuildNoRace(t, harness.IngressPkg)
	w.adminFile = filepath.Join(t.TempDir(), "admin-tokens")
	if err := os.WriteFile(w.adminFile, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.srv = h.Server()
	w.Env = h.Env(w.srv.URL())
	w.tail = h.TailEvents(w.Env)
	w.procs = harness.NewProcs(t, 60)
	return w
}

// ctx is the test's context.
func (w *world) ctx() context.Context { return w.t.Context() }

// ownerArgs are bin/owner's flags for process pid of deployment dep of
// agent.
func (w *world) ownerArgs(agent, dep, pid string) []string {
	return harness.OwnerFlags(w.URL, dep, pid, w.logs, leaseTTL, "--agent-name", agent)
}

// owner starts bin/owner for deployment dep of agent and waits until it
// serves.
func (w *world) owner(agent, dep, pid string) *proctest.Proc {
	w.t.Helper()
	return w.h.OwnerProc(w.procs, "owner "+pid, w.ownerBin, w.ownerArgs(agent, dep, pid), wait)
}

// ingress starts bin/ingress for deployment dep of agent (admin routes
// on, no user tokens), waits until it is ready and returns its base URL.
func (w *world) ingress(agent, dep, name string) string {
	w.t.Helper()
	_, base := w.h.IngressProc(w.procs, name, w.ingressBin, w.URL, dep, wait,
		"--agent-name", agent, "--insecure-dev", "--admin-token-file", w.adminFile)
	return base
}

// ---- HTTP ----

// call sends body as JSON (nil: none) with the admin token if admin, and
// returns the status and body.
func (w *world) call(method, url string, body any, admin bool) (int, []byte) {
	w.t.Helper()
	var opts []harness.Option
	if admin {
		opts = append(opts, harness.Bearer(adminToken))
	}
	r, err := w.client.DoJSON(w.ctx(), method, url, body, opts...)
	w.h.Check(err)
	return r.Code, r.Body
}

// want decodes an answer of status code into out, failing the test on
// another status.
func (w *world) want(what string, code int, body []byte, status int, out any) {
	w.t.Helper()
	if code != status {
		w.t.Fatalf("%s: HTTP %d %s, want %d", what, code, body, status)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			w.t.Fatalf("%s: %s: %v", what, body, err)
		}
	}
}

// errorCode is the code of an error answer {"error":{"code"}}.
func errorCode(body []byte) string {
	var e ingress.ErrorBody
	_ = json.Unmarshal(body, &e)
	return e.Error.Code
}

// wantError fails the test unless the answer is status with error code.
func (w *world) wantError(what string, code int, body []byte, status int, errCode string) {
	w.t.Helper()
	if code != status || errorCode(body) != errCode {
		w.t.Fatalf("%s: HTTP %d %s, want %d %s", what, code, body, status, errCode)
	}
}

// create starts a session through the ingress at base with a first
// message text (201).
func (w *world) create(base, text string) ingress.Created {
	w.t.Helper()
	code, b := w.call(http.MethodPost, base+"/v1/sessions", map[string]string{"text": text}, false)
	var c ingress.Created
	w.want("create", code, b, http.StatusCreated, &c)
	if c.SessionID == "" || c.Seq == 0 {
		w.t.Fatalf("create: %s: no session or seq", b)
	}
	return c
}

// deliver posts text to session sid through the ingress at base.
func (w *world) deliver(base, sid, text string) (int, []byte) {
	w.t.Helper()
	return w.call(http.MethodPost, base+"/v1/deliveries", map[string]string{"sessionId": sid, "text": text}, false)
}

// accepted posts text to sid through base and wants 202.
func (w *world) accepted(base, sid, text string) ingress.Receipt {
	w.t.Helper()
	code, b := w.deliver(base, sid, text)
	var r ingress.Receipt
	w.want("deliver "+text, code, b, http.StatusAccepted, &r)
	return r
}

// status is GET /v1/sessions/{sid} through base.
func (w *world) status(base, sid string) ingress.Status {
	w.t.Helper()
	code, b := w.call(http.MethodGet, base+"/v1/sessions/"+sid, nil, false)
	var s ingress.Status
	w.want("status of "+sid, code, b, http.StatusOK, &s)
	return s
}

// info is GET /v1/ingress (no token).
func (w *world) info(base string) ingress.IngressInfo {
	w.t.Helper()
	code, b := w.call(http.MethodGet, base+"/v1/ingress", nil, false)
	var i ingress.IngressInfo
	w.want("GET /v1/ingress", code, b, http.StatusOK, &i)
	return i
}

// agents is GET /v1/admin/agents.
func (w *world) agents(base string) ingress.Agents {
	w.t.Helper()
	code, b := w.call(http.MethodGet, base+"/v1/admin/agents", nil, true)
	var a ingress.Agents
	w.want("GET /v1/admin/agents", code, b, http.StatusOK, &a)
	return a
}

// promote is POST /v1/admin/agents/{agent}/promote through base.
func (w *world) promote(base, agent, dep string) (int, []byte) {
	w.t.Helper()
	return w.call(http.MethodPost, base+"/v1/admin/agents/"+agent+"/promote", map[string]string{"deploymentId": dep}, true)
}

// promoted promotes dep and wants 200.
func (w *world) promoted(base, agent, dep string) ingress.Promoted {
	w.t.Helper()
	code, b := w.promote(base, agent, dep)
	var p ingress.Promoted
	w.want("promote "+dep, code, b, http.StatusOK, &p)
	if p.Agent != agent || p.Promoted != dep || p.Revision == 0 {
		w.t.Fatalf("promote %s of %s: %s", dep, agent, b)
	}
	return p
}

// waitStamps waits until every ingress in bases reports promotion revision
// rev and stamps dep (GET /v1/ingress).
func (w *world) waitStamps(rev uint64, dep string, bases ...string) {
	w.t.Helper()
	for _, base := range bases {
		w.h.Eventually(wait, fmt.Sprintf("%s stamps %s at revision %d", base, dep, rev), func() bool {
			i := w.info(base)
			return i.PromotionRevision == rev && i.Stamps == dep
		})
	}
}

// depView is one deployment of an agent in GET /v1/admin/agents, with the
// agent's promoted deployment.
type depView struct {
	Promoted   string
	Retired    bool
	OwnersLive int
}

// deploymentView is deployment dep of agent in GET /v1/admin/agents; ok
// is false when the view has none.
func deploymentView(a ingress.Agents, agent, dep string) (depView, bool) {
	for _, av := range a.Agents {
		if av.Agent != agent {
			continue
		}
		for _, d := range av.Deployments {
			if d.DeploymentID == dep {
				return depView{Promoted: av.Promoted, Retired: d.Retired, OwnersLive: d.OwnersLive}, true
			}
		}
	}
	return depView{}, false
}
