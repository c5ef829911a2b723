// Package tour runs the README's Tour and Upgrade against the real
// binaries, started as the README starts them: make run (a NATS server of
// its own, then owner and ingress of v1), make deployment, make stop.
package tour

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// wait bounds every poll: generous, for -race on small machines.
const wait = 20 * time.Second

// deliveryJSON is the README's raw wire-v1 delivery, with %s for the session ID
// it does not name.
const deliveryJSON = `{"v":1,"kind":"deliver","id":"c1","acceptedDeploymentId":"v1","acceptedAt":"2026-11-30T00:00:00Z","deliver":{"mode":"queue","payloads":[{"message":"hello"}]}}`

// tourKinds are the README's event kinds, in order, for one echoed delivery.
var tourKinds = []string{"session.started", "command.applied", "turn.started", "message.output", "turn.step", "turn.completed", "session.waiting"}

type event struct {
	Seq  uint64          `json:"seq"`
	Kind string          `json:"kind"`
	Data json.RawMessage `json:"data"`
}

func TestTour(t *testing.T) {
	s := newStack(t)
	run := s.make("run")
	base := run.ready("v1")
	natsURL := "nats://127.0.0.1:" + s.value("NATS_PORT")

	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	// curl -s localhost:8080/readyz
	if code, body := get(t, base+"/readyz"); code != http.StatusOK || strings.TrimSpace(body) != "ok" {
		t.Fatalf("GET /readyz = %d %q, want 200 ok", code, body)
	}

	// nats stream ls -a
	for _, name := range []string{"BATON_INBOX", "BATON_EVENTS", "BATON_TASKS", "KV_baton_sessions", "KV_baton_hooks", "KV_baton_owners", "OBJ_baton_state"} {
		if _, err := js.Stream(t.Context(), name); err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
	}

	// The owner's metrics and the admin routes, with the printed token.
	if code, body := get(t, "http://127.0.0.1:"+s.value("METRICS_PORT")+"/metrics"); code != http.StatusOK || !strings.Contains(body, "baton_owner_sessions_loaded") {
		t.Fatalf("owner metrics: %d", code)
	}
	token := run.waitFor(`export A='Authorization: Bearer (\S+)'`, wait)[1]
	if b, _ := os.ReadFile(filepath.Join(s.dir, "admin-token")); strings.TrimSpace(string(b)) != token {
		t.Fatalf("printed admin token %q, file holds %q", token, b)
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/admin/deployments", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/admin/deployments with the printed token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// nats req baton.deploy.v1.start '{"deploymentId":"v1"}'
	msg, err := nc.Request("baton.deploy.v1.start", []byte(`{"deploymentId":"v1"}`), wait)
	if err != nil {
		t.Fatalf("start request: %v", err)
	}
	var started struct {
		SessionID    string `json:"sessionId"`
		DeploymentID string `json:"deploymentId"`
		Created      bool   `json:"created"`
		WireVersion  int    `json:"wireVersion"`
	}
	if err := json.Unmarshal(msg.Data, &started); err != nil || started.SessionID == "" || !started.Created ||
		started.DeploymentID != "v1" || started.WireVersion != wire.CurrentVersion {
		t.Fatalf("start reply %s (%v), want a created v1 session", msg.Data, err)
	}
	sid := started.SessionID

	// nats pub baton.inbox.$SID '<raw wire-v1 delivery>'
	if err := nc.Publish("baton.inbox."+sid, []byte(deliveryJSON)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// nats sub --stream BATON_EVENTS --all "baton.events.$SID" --raw
	events := readEvents(t, js, sid)
	checkTour(t, events)

	// curl -s -X POST localhost:8080/v1/deliveries -d '{"alias":"C123.456","text":"hello"}'
	resp, err := http.Post(base+"/v1/deliveries", "application/json", strings.NewReader(`{"alias":"C123.456","text":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var accepted struct {
		SessionID    string `json:"sessionId"`
		Seq          uint64 `json:"seq"`
		Created      bool   `json:"created"`
		DeploymentID string `json:"deploymentId"`
	}
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/deliveries = %d %s, want 202", resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, &accepted); err != nil || accepted.SessionID == "" || !accepted.Created || accepted.DeploymentID != "v1" {
		t.Fatalf("POST /v1/deliveries body %s (%v), want a created v1 session", body, err)
	}
	if accepted.SessionID == sid {
		t.Fatalf("the alias reused session %s started over NATS", sid)
	}
	aid := accepted.SessionID

	// curl -s 'localhost:8080/v1/sessions/$ID/events?follow=false'
	var httpEvents []event
	eventually(t, "the echo in GET /v1/sessions/"+aid+"/events", func() bool {
		code, body := get(t, base+"/v1/sessions/"+aid+"/events?follow=false")
		if code != http.StatusOK {
			return false
		}
		httpEvents = nil
		if err := json.Unmarshal([]byte(body), &httpEvents); err != nil {
			t.Fatalf("events body %q: %v", body, err)
		}
		return hasKind(httpEvents, "session.waiting") && hasEcho(httpEvents)
	})
	checkTour(t, httpEvents)

	// curl -s localhost:8080/v1/sessions/$ID
	var status struct {
		State string `json:"state"`
	}
	code, body2 := get(t, base+"/v1/sessions/"+aid)
	if code != http.StatusOK {
		t.Fatalf("GET /v1/sessions/%s = %d %s", aid, code, body2)
	}
	if err := json.Unmarshal([]byte(body2), &status); err != nil || status.State != "active" {
		t.Fatalf("GET /v1/sessions/%s = %s (%v), want state active", aid, body2, err)
	}

	// nats micro info baton-ingress
	info, err := nc.Request("$SRV.INFO.baton-ingress", nil, wait)
	if err != nil {
		t.Fatalf("$SRV.INFO.baton-ingress: %v", err)
	}
	var svc struct {
		Name      string `json:"name"`
		Endpoints []struct {
			Name string `json:"name"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal(info.Data, &svc); err != nil || svc.Name != "baton-ingress" || len(svc.Endpoints) == 0 {
		t.Fatalf("$SRV.INFO.baton-ingress = %s (%v), want the service with its endpoints", info.Data, err)
	}

	// Ctrl-C: one drain, exit 0.
	nc.Close()
	run.ctrlC()
	if out := run.interrupted(drainWait); !strings.Contains(out, "baton: deployment v1 stopped: owner exit 0, ingress exit 0") {
		t.Fatal("make run did not stop cleanly")
	}
}

// readEvents reads baton.events.<sid> from BATON_EVENTS with an ordered
// consumer until session.waiting follows the echo of "hello".
func readEvents(t *testing.T, js jetstream.JetStream, sid string) []event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, "BATON_EVENTS", jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"baton.events." + sid},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	var evs []event
	for {
		m, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatalf("reading baton.events.%s: %v; so far %s", sid, err, kinds(evs))
		}
		var ev event
		if err := json.Unmarshal(m.Data(), &ev); err != nil {
			t.Fatalf("event %q: %v", m.Data(), err)
		}
		evs = append(evs, ev)
		if ev.Kind == "session.waiting" && hasEcho(evs) {
			return evs
		}
	}
}

// checkTour checks that the README's kinds appear in order in evs and that
// the echo is message.output {"text":"hello"}.
func checkTour(t *testing.T, evs []event) {
	t.Helper()
	if !hasEcho(evs) {
		t.Fatalf("no message.output {\"text\":\"hello\"} in %s", kinds(evs))
	}
	i := 0
	for _, ev := range evs {
		if i < len(tourKinds) && ev.Kind == tourKinds[i] {
			i++
		}
	}
	if i < len(tourKinds) {
		t.Fatalf("events %s do not contain %v in order (missing %s)", kinds(evs), tourKinds, tourKinds[i])
	}
	for j, ev := range evs {
		if ev.Seq != uint64(j+1) {
			t.Fatalf("event %d has seq %d: %s", j, ev.Seq, kinds(evs))
		}
	}
}

func hasEcho(evs []event) bool {
	for _, ev := range evs {
		if ev.Kind != "message.output" {
			continue
		}
		var d struct {
			Text string `json:"text"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && d.Text == "hello" {
			return true
		}
	}
	return false
}

func hasKind(evs []event, kind string) bool {
	for _, ev := range evs {
		if ev.Kind == kind {
			return true
		}
	}
	return false
}

func kinds(evs []event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%d:%s %s; ", ev.Seq, ev.Kind, ev.Data)
	}
	return b.String()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// eventually polls cond until it holds or wait passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
