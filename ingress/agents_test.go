package ingress_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

func agentOf(name, dep string) func(*ingress.Config) {
	return func(c *ingress.Config) { c.Agent, c.Deployment = name, dep }
}

func poolAgent(name string) func(*pool.Config) { return func(c *pool.Config) { c.AgentName = name } }

// natsCall sends an ingress request on subject and returns the error code
// header ("" on success) and the body.
func natsCall(t *testing.T, e *env, subject, body string) (string, []byte) {
	t.Helper()
	msg, err := e.NC.RequestMsg(&nats.Msg{Subject: subject, Data: []byte(body)}, 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	return msg.Header.Get(micro.ErrorCodeHeader), msg.Data
}

func errCode(b []byte) string {
	var eb ingress.ErrorBody
	_ = json.Unmarshal(b, &eb)
	return eb.Error.Code
}

// Two agents side by side at the ingress: each agent's ingress serves its
// own NATS subjects only and refuses deliveries to the other's sessions,
// over HTTP and NATS, writing nothing; the admin routes refuse moves and
// promotions across agents.
func TestAgentsAtTheIngress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, agentOf("alpha", "a1"))
	e.owner("a1", "pa1", poolAgent("alpha"))
	e.owner("b1", "pb1", poolAgent("beta"))
	beta := e.h.Ingress(e.URL, ingress.Config{Deployment: "b1", Agent: "beta", InsecureDev: true, AdminTokens: []string{adminToken},
		Log: e.h.Logger(slog.LevelInfo)})

	c := e.create(`{"alias":"alpha-thread","text":"hello"}`)
	if c.DeploymentID != "a1" {
		t.Fatalf("created on %s", c.DeploymentID)
	}
	e.waitEvents(c.SessionID, "the first turn", func(evs []wire.Event) bool { return hasKind(evs, wire.EventTurnCompleted) })
	e.quiet()

	// Through beta: refused, nothing written.
	before := e.durable()
	r, err := e.http.DoJSON(t.Context(), http.MethodPost, beta.URL()+"/v1/deliveries",
		map[string]any{"sessionId": c.SessionID, "text": "wrong agent"})
	e.h.Check(err)
	if r.Code != http.StatusConflict || errCode(r.Body) != ingress.CodeAgentMismatch {
		t.Fatalf("delivery through beta's ingress: %d %s", r.Code, r.Body)
	}
	if code, b := natsCall(t, e, "baton.ingress.beta.deliver", `{"sessionId":"`+c.SessionID+`","text":"wrong agent"}`); code != "409" || errCode(b) != ingress.CodeAgentMismatch {
		t.Fatalf("delivery on baton.ingress.beta.deliver: %s %s", code, b)
	}
	if code, b := natsCall(t, e, "baton.ingress.beta.deliver", `{"alias":"alpha-thread","text":"wrong agent"}`); code != "409" || errCode(b) != ingress.CodeAgentMismatch {
		t.Fatalf("delivery by alias on baton.ingress.beta.deliver: %s %s", code, b)
	}
	if after := e.durable(); !equalDurable(before, after) {
		t.Fatalf("a refused delivery wrote: %v -> %v", before, after)
	}

	// Alpha's subjects reach alpha's ingress; the un-prefixed ones belong
	// to the default agent only, which has no ingress here.
	code, b := natsCall(t, e, "baton.ingress.alpha.deliver", `{"sessionId":"`+c.SessionID+`","text":"over NATS"}`)
	var rc ingress.Receipt
	if code != "" || json.Unmarshal(b, &rc) != nil || rc.DeploymentID != "a1" || !rc.OwnerLive {
		t.Fatalf("delivery on baton.ingress.alpha.deliver: %s %s", code, b)
	}
	if _, err := e.NC.Request("baton.ingress.deliver", []byte(`{"sessionId":"`+c.SessionID+`","text":"x"}`), 2*time.Second); !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("the un-prefixed subject answered for a non-default agent: %v", err)
	}

	var info ingress.IngressInfo
	e.mustGet("/v1/ingress", "", &info)
	if info != (ingress.IngressInfo{Agent: "alpha", DeploymentID: "a1", Stamps: "a1"}) {
		t.Fatalf("GET /v1/ingress = %+v", info)
	}

	// Admin refusals.
	checkError(t, e, http.MethodPost, "/v1/admin/sessions/"+c.SessionID+"/move", `{"deploymentId":"b1"}`, adminToken, http.StatusConflict, ingress.CodeAgentMismatch)
	e.owner("a2", "pa2", poolAgent("alpha"))
	r, err = e.http.DoJSON(t.Context(), http.MethodPost, beta.URL()+"/v1/admin/sessions/"+c.SessionID+"/move",
		map[string]any{"deploymentId": "a2"}, harness.Bearer(adminToken))
	e.h.Check(err)
	if r.Code != http.StatusConflict || errCode(r.Body) != ingress.CodeAgentMismatch {
		t.Fatalf("a move of alpha's session through beta's ingress: %d %s", r.Code, r.Body)
	}
	checkError(t, e, http.MethodPost, "/v1/admin/agents/alpha/promote", `{"deploymentId":"b1"}`, adminToken, http.StatusConflict, ingress.CodeAgentMismatch)
	checkError(t, e, http.MethodPost, "/v1/admin/agents/gamma/promote", `{"deploymentId":"a1"}`, adminToken, http.StatusNotFound, ingress.CodeUnknownAgent)
	checkError(t, e, http.MethodPost, "/v1/admin/agents/Alpha/promote", `{"deploymentId":"a1"}`, adminToken, http.StatusBadRequest, ingress.CodeInvalidAgent)
	checkError(t, e, http.MethodPost, "/v1/admin/agents/alpha/promote", `{}`, adminToken, http.StatusBadRequest, ingress.CodeBadRequest)
	e.h.Check(e.Store.RegisterAgent(t.Context(), "a9", "alpha"))
	checkError(t, e, http.MethodPost, "/v1/admin/agents/alpha/promote", `{"deploymentId":"a9"}`, adminToken, http.StatusNotFound, ingress.CodeDeploymentNotFound)
	e.h.Check(e.Store.AdvertiseDeployment(t.Context(), "a9", []int{1}, []int{1}))
	if _, _, err := e.Store.RetireDeployment(t.Context(), "a9"); err != nil {
		t.Fatal(err)
	}
	checkError(t, e, http.MethodPost, "/v1/admin/agents/alpha/promote", `{"deploymentId":"a9"}`, adminToken, http.StatusConflict, ingress.CodeTargetRetired)
	var un ingress.Unretired
	e.mustAdmin(http.MethodPost, "/v1/admin/deployments/a9/unretire", "", http.StatusOK, &un)
	if !un.Changed || un.Retired {
		t.Fatalf("unretire: %+v", un)
	}
	e.mustAdmin(http.MethodPost, "/v1/admin/deployments/a9/unretire", "", http.StatusOK, &un)
	if un.Changed {
		t.Fatalf("unretire twice: %+v", un)
	}

	// A deployment whose live owners never advertised (a build from before
	// the advertisement: no deployment record) is promotable: a rollback
	// to the previous build.
	e.h.Check(e.Store.RegisterAgent(t.Context(), "a8", "alpha"))
	checkError(t, e, http.MethodPost, "/v1/admin/agents/alpha/promote", `{"deploymentId":"a8"}`, adminToken, http.StatusNotFound, ingress.CodeDeploymentNotFound)
	if _, err := e.Store.AcquireLease(t.Context(), kv.Lease{ProcessID: "old-build-a8", DeploymentID: "a8", Instance: "i1"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := e.http.DoJSON(t.Context(), http.MethodPost, e.ing.URL()+"/v1/admin/agents/alpha/promote",
			map[string]any{"deploymentId": "a8"}, harness.Bearer(adminToken))
		e.h.Check(err)
		if r.Code == http.StatusOK {
			break
		}
		if r.Code != http.StatusNotFound || time.Now().After(deadline) {
			t.Fatalf("promote a8 with a live owner that never advertised: %d %s", r.Code, r.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Promotion at the ingress: after the 200 the ingress stamps the promoted
// deployment (GET /v1/ingress says so), deliveries move the session there
// and new sessions start there; the agents view shows it; a promoted
// deployment without a live owner makes receipts and status say
// ownerLive:false; a retired one with nothing else promoted refuses
// creation.
func TestPromotionAtTheIngress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	stop2 := e.owner("v2", "p2")
	c := e.create(`{"text":"hello"}`)
	e.waitEvents(c.SessionID, "the first turn", func(evs []wire.Event) bool { return hasKind(evs, wire.EventTurnCompleted) })

	var p ingress.Promoted
	e.mustAdmin(http.MethodPost, "/v1/admin/agents/default/promote", `{"deploymentId":"v2"}`, http.StatusOK, &p)
	if p.Agent != "default" || p.Promoted != "v2" || p.Previous != "" || p.Revision == 0 {
		t.Fatalf("promote: %+v", p)
	}
	e.eventually(10*time.Second, "the ingress stamping v2", func() bool {
		var info ingress.IngressInfo
		e.mustGet("/v1/ingress", "", &info)
		return info.Stamps == "v2" && info.PromotionRevision == p.Revision && info.DeploymentID == "v1"
	})
	rc := e.deliver(`{"sessionId":"` + c.SessionID + `","text":"after the promotion"}`)
	if rc.DeploymentID != "v2" || !rc.OwnerLive {
		t.Fatalf("receipt %+v", rc)
	}
	e.eventually(30*time.Second, "the session on v2", func() bool { return e.status(c.SessionID).DeploymentID == "v2" })
	if n := e.create(`{}`).DeploymentID; n != "v2" {
		t.Fatalf("a new session started on %s", n)
	}
	var agents ingress.Agents
	e.mustAdmin(http.MethodGet, "/v1/admin/agents", "", http.StatusOK, &agents)
	if len(agents.Agents) != 1 || agents.Agents[0].Promoted != "v2" || len(agents.Agents[0].Deployments) != 2 ||
		agents.Agents[0].Deployments[1].OwnersLive != 1 {
		t.Fatalf("agents: %+v", agents)
	}

	// The promoted deployment's owner stops: nothing will act on the session.
	stop2()
	e.eventually(10*time.Second, "ownerLive false", func() bool { return !e.status(c.SessionID).OwnerLive })
	if rc := e.deliver(`{"sessionId":"` + c.SessionID + `","text":"nobody"}`); rc.OwnerLive {
		t.Fatalf("receipt with no live owner: %+v", rc)
	}
	// Retired and promoted, with nothing else promoted: no new sessions.
	e.mustAdmin(http.MethodPost, "/v1/admin/deployments/v2/retire", "", http.StatusOK, nil)
	e.eventually(10*time.Second, "creation refused", func() bool {
		code, b := e.post("/v1/sessions", `{}`)
		return code == http.StatusConflict && errCode(b) == ingress.CodeDeploymentRetired
	})
	// Promoting v1 back: the session's next message is adopted by v1.
	e.mustAdmin(http.MethodPost, "/v1/admin/agents/default/promote", `{"deploymentId":"v1"}`, http.StatusOK, &p)
	if p.Previous != "v2" {
		t.Fatalf("promote back: %+v", p)
	}
	e.eventually(10*time.Second, "the ingress stamping v1", func() bool {
		var info ingress.IngressInfo
		e.mustGet("/v1/ingress", "", &info)
		return info.Stamps == "v1"
	})
	if rc := e.deliver(`{"sessionId":"` + c.SessionID + `","text":"back on v1"}`); !rc.OwnerLive || rc.DeploymentID != "v1" {
		t.Fatalf("receipt after the rollback: %+v", rc)
	}
	e.eventually(30*time.Second, "the session on v1", func() bool { return e.status(c.SessionID).DeploymentID == "v1" })
}

// mustGet GETs path (token "" sends none) and decodes a 200 into v.
func (e *env) mustGet(path, token string, v any) {
	e.t.Helper()
	code, b := e.call(http.MethodGet, path, "", token)
	if code != http.StatusOK {
		e.t.Fatalf("GET %s = %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		e.t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

func hasKind(evs []wire.Event, kind string) bool {
	for _, ev := range evs {
		if ev.Kind == kind {
			return true
		}
	}
	return false
}

// A quarantined session is never retried on another agent's deployment:
// 409 agent_mismatch, nothing written.
func TestRetryToAnotherAgentRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.quarantinedAlone("retry-across")
	e.h.Check(e.Store.RegisterAgent(t.Context(), "b1", "beta"))
	before := e.durable()
	checkError(t, e, http.MethodPost, "/v1/admin/sessions/"+id+"/retry", `{"deploymentId":"b1"}`, adminToken, http.StatusConflict, ingress.CodeAgentMismatch)
	if after := e.durable(); !equalDurable(before, after) {
		t.Fatalf("a refused retry wrote: %v -> %v", before, after)
	}
}
