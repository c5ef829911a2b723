package ingress_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
)

// A client following a session's SSE stream sees it continue unchanged
// across an A→B handoff (same session, same stream, seq contiguous, the
// envelope's deployment switching from v1 to v2), and a Last-Event-ID
// resume across the handoff has no gap and no duplicate.
func TestSSEAcrossHandoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	e.owner("v2", "p2")
	v2 := ingressFor(t, e, "v2")
	id := e.create(`{"alias":"hand"}`).SessionID

	c1 := e.sse("/v1/sessions/" + id + "/events")
	e.deliver(`{"alias":"hand","text":"a1"}`)
	got := until(t, c1, 20*time.Second, "a1", isOutput("a1"))
	got = append(got, until(t, c1, 20*time.Second, "settled", isKind("session.waiting"))...)

	// Accepted by deployment v2's ingress while idle: the session moves.
	postTo(t, v2, `{"alias":"hand","text":"b1"}`)
	got = append(got, until(t, c1, 20*time.Second, "b1", isOutput("b1"))...)
	c1.Close()
	cursor := got[len(got)-1].ID
	cur, err := e.Store.LeaderSession(t.Context(), id)
	if err != nil || cur.Record.DeploymentID != "v2" || cur.Record.Epoch < 2 {
		t.Fatalf("session did not move to v2: %+v %v", cur.Record, err)
	}

	postTo(t, v2, `{"alias":"hand","text":"b2"}`)
	c2 := e.sse("/v1/sessions/"+id+"/events", "Last-Event-ID", strconv.FormatUint(cursor, 10))
	got = append(got, until(t, c2, 20*time.Second, "b2", isOutput("b2"))...)

	deployments := map[string]bool{}
	for i, ev := range got {
		if ev.ID != uint64(i+1) {
			t.Fatalf("event %d has id %d: gap or duplicate across the handoff (resumed at %d)", i+1, ev.ID, cursor)
		}
		var env struct {
			SessionID    string `json:"sessionId"`
			DeploymentID string `json:"deploymentId"`
		}
		if err := json.Unmarshal([]byte(ev.Data), &env); err != nil || env.SessionID != id {
			t.Fatalf("event %d is not of session %s: %s", ev.ID, id, ev.Data)
		}
		deployments[env.DeploymentID] = true
	}
	if !deployments["v1"] || !deployments["v2"] {
		t.Fatalf("events came from %v, want both v1 and v2 owners", deployments)
	}
}

func isKind(kind string) func(harness.Frame) bool {
	return func(ev harness.Frame) bool { return ev.Event == kind }
}

// ingressFor runs a second ingress stamping deployment dep.
func ingressFor(t *testing.T, e *env, dep string) *httptest.Server {
	t.Helper()
	ing, err := ingress.New(ingress.Config{NC: e.NC, JS: e.JS, Deployment: dep, InsecureDev: true, StartTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ing.Handler())
	t.Cleanup(func() { ing.Close(); srv.CloseClientConnections(); srv.Close() })
	return srv
}

func postTo(t *testing.T, srv *httptest.Server, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/deliveries", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delivery via %s = %d", srv.URL, resp.StatusCode)
	}
}
