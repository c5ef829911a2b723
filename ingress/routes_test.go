package ingress_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// Every route of docs/api.md against an owner running the demo agent: the
// echo of each delivery arrives on SSE as message.output {"text"}.
func TestEveryRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")

	c := e.create(`{"alias":"thread-1","text":"hello","timeout":"1h","caller":"alice"}`)
	if !c.Created || c.DeploymentID != "v1" || c.Seq == 0 {
		t.Fatalf("create = %+v", c)
	}
	id := c.SessionID
	sse := e.sse("/v1/sessions/" + id + "/events")
	until(t, sse, 10*time.Second, "hello", isOutput("hello"))

	wakes, err := e.NC.SubscribeSync(e.Names.Wake("v1"))
	if err != nil {
		t.Fatal(err)
	}
	r := e.deliver(`{"alias":"thread-1","text":"by alias"}`)
	if r.SessionID != id || r.Created || r.DeploymentID != "v1" || r.Seq <= c.Seq {
		t.Fatalf("delivery by alias = %+v", r)
	}
	if m, err := wakes.NextMsg(5 * time.Second); err != nil || string(m.Data) != `{"sessionId":"`+id+`","source":"ingress"}` {
		t.Fatalf("no wake after the publish: %v %v", m, err)
	}
	until(t, sse, 10*time.Second, "by alias", isOutput("by alias"))
	e.deliver(jsonBody(map[string]any{"sessionId": id, "mode": "steer", "caller": "bob",
		"payloads": []any{map[string]any{"message": "by id"}}}))
	until(t, sse, 10*time.Second, "by id", isOutput("by id"))

	// input: /ask waits for an answer to its request ID.
	e.deliver(jsonBody(map[string]any{"sessionId": id, "text": "/ask what is it?"}))
	evs := e.waitEvents(id, "input.requested", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventInputRequested) == 1 })
	ask := harness.LastData[wire.InputRequested](t, evs, wire.EventInputRequested)
	e.must("/v1/sessions/"+id+"/input", jsonBody(map[string]any{"requestId": ask.RequestID, "value": "42"}), http.StatusAccepted, nil)
	until(t, sse, 10*time.Second, "the answer", isOutput("input "+ask.RequestID+": \"42\""))

	// authorize: /authorize waits for a callback of its attempt.
	e.deliver(jsonBody(map[string]any{"sessionId": id, "text": "/authorize"}))
	evs = e.waitEvents(id, "auth.requested", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventAuthRequested) == 1 })
	att := harness.LastData[wire.AuthRequested](t, evs, wire.EventAuthRequested)
	e.must("/v1/sessions/"+id+"/authorize", jsonBody(map[string]any{"attemptId": att.AttemptID, "result": "granted", "data": map[string]any{"scope": "x"}}), http.StatusAccepted, nil)
	until(t, sse, 10*time.Second, "the callback", isOutput("authorization "+att.AttemptID+": granted"))

	// The control commands: each is applied.
	for _, k := range []string{"cancel", "reset", "clear", "compact"} {
		var rc ingress.Receipt
		body := ""
		if k == "clear" {
			body = `{"caller":"ops","idempotencyKey":"clear-1"}`
		}
		e.must("/v1/sessions/"+id+"/"+k, body, http.StatusAccepted, &rc)
		if rc.SessionID != id || rc.Seq == 0 || rc.Created {
			t.Fatalf("%s = %+v", k, rc)
		}
	}
	evs = e.waitEvents(id, "four control commands applied", func(evs []wire.Event) bool {
		n := 0
		for _, a := range applied(t, evs) {
			if slices.Contains([]string{"cancel", "reset", "clear", "compact"}, a.Kind) {
				n++
			}
		}
		return n == 4
	})
	contiguous(t, evs, 0)

	// Status as of the last commit, once the session settled.
	var st ingress.Status
	e.eventually(10*time.Second, "an idle session", func() bool { st = e.status(id); return st.Idle })
	if st.SessionID != id || st.State != "active" || st.DeploymentID != "v1" || st.Epoch != 1 || st.OwnerRunID == "" ||
		st.QueueDepth != 0 || !slices.Equal(st.Tokens, []string{id, "thread-1"}) || st.EventSeq < uint64(len(evs)) {
		t.Fatalf("status = %+v", st)
	}
	all := e.events(id, 0)
	contiguous(t, all, 0)
	if tail := e.events(id, 5); len(tail) != len(all)-5 || tail[0].Seq != 6 {
		t.Fatalf("?after=5 returned %d events from %d", len(tail), tail[0].Seq)
	}

	// Probes, metrics and the admin prefix.
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200} {
		if code, b := e.call(http.MethodGet, path, "", ""); code != want {
			t.Fatalf("%s = %d %s", path, code, b)
		}
	}
	checkError(t, e, http.MethodGet, "/v1/admin/deployments", "", testToken, http.StatusUnauthorized, "unauthorized")
	if code, b := e.call(http.MethodGet, "/v1/admin/deployments", "", "admin-token"); code != http.StatusOK {
		t.Fatalf("the drain report = %d %s", code, b)
	}
	checkError(t, e, http.MethodGet, "/v1/nothing", "", testToken, http.StatusNotFound, "not_found")

	// /done ends the session: SSE ends after session.ended; deliveries are gone.
	e.deliver(jsonBody(map[string]any{"alias": "thread-1", "text": "/done"}))
	until(t, sse, 10*time.Second, "session.ended", func(ev harness.Frame) bool { return ev.Event == wire.EventSessionEnded })
	select {
	case _, open := <-sse.Frames():
		if open {
			t.Fatal("an event after session.ended")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the SSE response did not end after session.ended")
	}
	e.eventually(10*time.Second, "state ended", func() bool { return e.status(id).State == string(record.StateEnded) })
	last := e.events(id, 0)
	if code, b := e.call(http.MethodGet, "/v1/sessions/"+id+"/events", "", testToken, "Last-Event-ID", strconv.FormatUint(last[len(last)-1].Seq, 10)); code != http.StatusNoContent {
		t.Fatalf("SSE resume after the end = %d %s, want 204", code, b)
	}
	checkError(t, e, http.MethodPost, "/v1/deliveries", `{"sessionId":"`+id+`","text":"late"}`, testToken, http.StatusGone, "gone")
	checkError(t, e, http.MethodPost, "/v1/sessions/"+id+"/cancel", ``, testToken, http.StatusGone, "gone")
	checkMetrics(t, e)
}

// checkMetrics reads the registry: requests by route and status, the
// delivery latency histogram and the SSE gauges.
func checkMetrics(t *testing.T, e *env) {
	t.Helper()
	fams, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, f := range fams {
		seen[f.GetName()] = true
		if f.GetName() == "baton_ingress_requests_total" {
			found := false
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				found = found || labels["route"] == "POST /v1/deliveries" && labels["status"] == "202" && m.GetCounter().GetValue() > 0
			}
			if !found {
				t.Fatal("no count of POST /v1/deliveries 202")
			}
		}
	}
	for _, name := range []string{"baton_ingress_requests_total", "baton_ingress_command_seconds", "baton_ingress_sse_clients", "baton_ingress_sse_hubs", "baton_ingress_sessions_created_total"} {
		if !seen[name] {
			t.Errorf("metric %s missing", name)
		}
	}
}

// checkError asserts an error answer's status and code.
func checkError(t *testing.T, e *env, method, path, body, token string, status int, code string) {
	t.Helper()
	got, b := e.call(method, path, body, token)
	var eb ingress.ErrorBody
	if err := json.Unmarshal(b, &eb); err != nil || got != status || eb.Error.Code != code || eb.Error.Message == "" {
		t.Fatalf("%s %s %s = %d %s, want %d %s", method, path, body, got, b, status, code)
	}
}

// Creating a session (or a delivery to a new alias) with no owner of the
// deployment running is 503 unavailable and creates nothing.
func TestNoOwnerIsUnavailable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if err := e.ing.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := e.durable()
	checkError(t, e, http.MethodPost, "/v1/sessions", `{"alias":"a1","text":"x"}`, testToken, http.StatusServiceUnavailable, "unavailable")
	checkError(t, e, http.MethodPost, "/v1/sessions", ``, testToken, http.StatusServiceUnavailable, "unavailable")
	checkError(t, e, http.MethodPost, "/v1/deliveries", `{"alias":"a1","text":"x"}`, testToken, http.StatusServiceUnavailable, "unavailable")
	if after := e.durable(); !equalDurable(before, after) {
		t.Fatalf("a refused request wrote: %v -> %v", before, after)
	}
}

// A session mid-handoff (state handoff and a marker) is an ordinary target:
// deliveries are accepted (the stream holds them) and never start a
// replacement session.
func TestMidHandoffAccepted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stop := e.owner("v1", "p1")
	c := e.create(`{"alias":"moving"}`)
	e.waitEvents(c.SessionID, "session.started", func(evs []wire.Event) bool { return len(evs) > 0 })
	stop()
	// p1 looks alive to its peers: a stand-in holds its lease. A dead
	// owner's session in state handoff is adopted by the first wake (a
	// delivery's) and its handoff resolved, which would race the status
	// below; a live but busy owner leaves it mid-handoff.
	if _, err := e.Store.AcquireLease(t.Context(), kv.Lease{ProcessID: "p1", DeploymentID: "v1", Instance: "stand-in"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	e.owner("v1", "p2") // answers start requests: a replacement would succeed
	cur, err := e.Store.LeaderSession(t.Context(), c.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	cur.Record.State = record.StateHandoff
	if _, err := e.Store.UpdateSession(t.Context(), cur.Record, cur.Revision); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.CreateMarker(t.Context(), record.Marker{HandoffID: "h1", SessionID: c.SessionID, SourceRun: cur.Record.OwnerRunID, Target: "v2"}); err != nil {
		t.Fatal(err)
	}
	sessions := liveKeys(t, e, e.Names.SessionsBucket())
	for _, body := range []string{`{"alias":"moving","text":"during"}`, `{"sessionId":"` + c.SessionID + `","text":"during"}`} {
		if r := e.deliver(body); r.SessionID != c.SessionID || r.Created {
			t.Fatalf("delivery mid-handoff = %+v", r)
		}
	}
	if st := e.status(c.SessionID); st.State != "handoff" || st.QueueDepth != 2 || st.Idle {
		t.Fatalf("status mid-handoff = %+v", st)
	}
	if got := liveKeys(t, e, e.Names.SessionsBucket()); !slices.Equal(got, sessions) {
		t.Fatalf("sessions %v -> %v: a replacement was created", sessions, got)
	}
}

func liveKeys(t *testing.T, e *env, bucket string) []string {
	t.Helper()
	h, err := e.JS.KeyValue(t.Context(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	lister, err := h.ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func equalDurable(a, b durable) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

var _ = strings.Contains
