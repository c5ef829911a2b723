package ingress_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// The same operations over NATS: the micro service baton-ingress answers
// on baton.ingress.<op> with the HTTP bodies and, on a refusal, the
// Nats-Service-Error-Code header (the HTTP status) and the same error body.
func TestMicro(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")

	var c ingress.Created
	req(t, e, "create", `{"alias":"nats-1","text":"over nats"}`, &c)
	if !c.Created || c.Seq == 0 {
		t.Fatalf("create = %+v", c)
	}
	var r ingress.Receipt
	req(t, e, "deliver", `{"alias":"nats-1","text":"again","idempotencyKey":"n1"}`, &r)
	if r.SessionID != c.SessionID || r.Created {
		t.Fatalf("deliver = %+v", r)
	}
	var again ingress.Receipt
	req(t, e, "deliver", `{"sessionId":"`+c.SessionID+`","text":"again","idempotencyKey":"n1"}`, &again)
	if again != r {
		t.Fatalf("repeat over NATS = %+v, first %+v", again, r)
	}
	e.deliver(`{"sessionId":"` + c.SessionID + `","text":"/ask why?"}`)
	evs := e.waitEvents(c.SessionID, "input.requested", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventInputRequested) == 1 })
	ask := harness.LastData[wire.InputRequested](t, evs, wire.EventInputRequested)
	req(t, e, "input", `{"sessionId":"`+c.SessionID+`","requestId":"`+ask.RequestID+`","value":true}`, &r)
	e.deliver(`{"sessionId":"` + c.SessionID + `","text":"/authorize"}`)
	evs = e.waitEvents(c.SessionID, "auth.requested", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventAuthRequested) == 1 })
	att := harness.LastData[wire.AuthRequested](t, evs, wire.EventAuthRequested)
	req(t, e, "authorize", `{"sessionId":"`+c.SessionID+`","attemptId":"`+att.AttemptID+`","result":"denied"}`, &r)
	for _, op := range []string{"cancel", "reset", "clear", "compact"} {
		req(t, e, op, `{"sessionId":"`+c.SessionID+`"}`, &r)
	}
	req(t, e, "tag", `{"sessionId":"`+c.SessionID+`","tags":{"via":"nats"}}`, &r)
	e.waitEvents(c.SessionID, "every command applied", func(evs []wire.Event) bool {
		kinds := map[string]bool{}
		for _, a := range applied(t, evs) {
			kinds[a.Kind] = true
		}
		return len(kinds) == 8 && slices.Equal(harness.Outputs(evs)[:2], []string{"over nats", "again"})
	})
	var st ingress.Status
	req(t, e, "status", `{"sessionId":"`+c.SessionID+`"}`, &st)
	if st.SessionID != c.SessionID || st.DeploymentID != "v1" || st.Tags["via"] != "nats" {
		t.Fatalf("status = %+v", st)
	}
	microError(t, e, "tag", `{"sessionId":"`+c.SessionID+`","tags":{"Bad":"x"}}`, "400", "invalid_tags")

	microError(t, e, "deliver", `{"text":"x"}`, "400", "bad_request")
	microError(t, e, "deliver", `{"alias":"a","text":"x","acceptedDeploymentId":"v9"}`, "400", "bad_request")
	microError(t, e, "status", `{"sessionId":"01JZZZZZZZZZZZZZZZZZZZZZZZ"}`, "404", "not_found")
	microError(t, e, "cancel", `{}`, "400", "bad_request")
	microError(t, e, "create", `{"alias":"nats-1"}`, "409", "conflict")
	microError(t, e, "deliver", `{"sessionId":"`+c.SessionID+`","text":"not again","idempotencyKey":"n1"}`, "409", "idempotency_conflict")
	microError(t, e, "input", `{"sessionId":"`+c.SessionID+`","requestId":"`+ask.RequestID+`","value":2}`, "409", "unknown_request")
	microError(t, e, "authorize", `{"sessionId":"`+c.SessionID+`","attemptId":"a-none","result":"granted"}`, "409", "unknown_request")
	microError(t, e, "deliver", `{"alias":"nats-1","text":nope}`, "400", "bad_request")

	// Discovery: nats micro ls / info.
	msg, err := e.NC.Request("$SRV.INFO."+ingress.ServiceName, nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		t.Fatal(err)
	}
	var subs []string
	for _, ep := range info.Endpoints {
		subs = append(subs, ep.Subject)
		if ep.QueueGroup != ingress.QueueGroup {
			t.Fatalf("endpoint %s queue group %q", ep.Name, ep.QueueGroup)
		}
	}
	want := []string{}
	for _, op := range append(ingress.Operations, ingress.RuntimeOnlyOperations...) {
		want = append(want, e.Names.Ingress(op))
	}
	if slices.Sort(subs); !slices.Equal(subs, sorted(want)) || info.Metadata["deployment"] != "v1" {
		t.Fatalf("endpoints %v metadata %v", subs, info.Metadata)
	}
}

func sorted(s []string) []string { slices.Sort(s); return s }

func req(t *testing.T, e *env, op, body string, v any) {
	t.Helper()
	msg, err := e.NC.Request(e.Names.Ingress(op), []byte(body), 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", op, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Fatalf("%s %s: error %s %s", op, body, code, msg.Data)
	}
	checkExchange(t, e, ingress.ServiceName, e.Names.Ingress(op), []byte(body), msg.Data, false)
	if err := json.Unmarshal(msg.Data, v); err != nil {
		t.Fatalf("%s: %v: %s", op, err, msg.Data)
	}
}

func microError(t *testing.T, e *env, op, body, status, code string) {
	t.Helper()
	msg, err := e.NC.RequestMsg(&nats.Msg{Subject: e.Names.Ingress(op), Data: []byte(body)}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var eb ingress.ErrorBody
	_ = json.Unmarshal(msg.Data, &eb)
	checkExchange(t, e, ingress.ServiceName, e.Names.Ingress(op), []byte(body), msg.Data, true)
	if msg.Header.Get(micro.ErrorCodeHeader) != status || msg.Header.Get(micro.ErrorHeader) == "" || eb.Error.Code != code {
		t.Fatalf("%s %s: headers %v body %s, want %s %s", op, body, msg.Header, msg.Data, status, code)
	}
}
