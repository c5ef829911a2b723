package ingress_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// Every refused request answers its status and code and writes nothing
// durable: no message on BATON_INBOX or BATON_EVENTS, no revision in any KV
// bucket (sessions, hooks, owners, receipts).
func TestBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	live := e.create(`{"alias":"live-alias","text":"hi"}`).SessionID
	gone := e.create(`{"alias":"gone-alias","text":"/done"}`).SessionID
	e.eventually(10*time.Second, "the ended session's tombstones", func() bool {
		h, _, err := e.Store.GetHook(t.Context(), "gone-alias")
		return err == nil && h.Tombstone
	})
	e.eventually(10*time.Second, "an idle live session", func() bool { return e.status(live).Idle })
	// A session waiting for input, and one waiting for an authorization.
	asker := e.create(`{"alias":"asker","text":"/ask colour?"}`).SessionID
	evs := e.waitEvents(asker, "input.requested", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventInputRequested) == 1 })
	ask := harness.LastData[wire.InputRequested](t, evs, wire.EventInputRequested).RequestID
	authz := e.create(`{"alias":"authz","text":"/authorize"}`).SessionID
	evs = e.waitEvents(authz, "auth.requested", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventAuthRequested) == 1 })
	attempt := harness.LastData[wire.AuthRequested](t, evs, wire.EventAuthRequested).AttemptID
	// An idempotency key used once, for the text "first".
	first := e.deliver(`{"sessionId":"` + live + `","text":"first","idempotencyKey":"idem-1"}`)
	e.eventually(10*time.Second, "the keyed delivery applied", func() bool { return e.status(live).Idle })
	// A commit's events reach the stream after its CAS: the checks below
	// compare the streams before and after each request, so every
	// committed event must be on them first.
	e.eventually(10*time.Second, "every committed event on its stream", func() bool {
		for _, id := range []string{live, gone, asker, authz} {
			evs := e.events(id, 0)
			if len(evs) == 0 || evs[len(evs)-1].Seq < e.status(id).EventSeq {
				return false
			}
		}
		return true
	})
	unknown := "01JZZZZZZZZZZZZZZZZZZZZZZZ"
	big := `{"alias":"live-alias","text":"` + strings.Repeat("x", ingress.DefaultMaxBodyBytes) + `"}`
	manyPayloads := `{"alias":"live-alias","payloads":[` + strings.TrimSuffix(strings.Repeat(`{"message":"x"},`, ingress.DefaultMaxPayloads+1), ",") + `]}`
	longKey := strings.Repeat("k", ingress.MaxKeyBytes+1)
	const (
		post, get  = http.MethodPost, http.MethodGet
		deliveries = "/v1/deliveries"
		sessions   = "/v1/sessions"
	)
	type row struct {
		name         string
		method, path string
		body         string
		token        string // "-" sends none
		hdr          []string
		status       int
		code         string
		// Optional: the error message contains msg; the error's
		// "expected" is exactly expected (JSON); the Allow header is allow.
		msg, expected, allow string
	}
	rows := []row{
		{"malformed JSON", post, deliveries, `{`, "", nil, 400, "bad_request", "", "", ""},
		{"not an object", post, deliveries, `[]`, "", nil, 400, "bad_request", "", "", ""},
		{"empty body", post, deliveries, ``, "", nil, 400, "bad_request", "", "", ""},
		{"both targets", post, deliveries, `{"sessionId":"` + live + `","alias":"live-alias","text":"x"}`, "", nil, 400, "bad_request", "", "", ""},
		{"neither target", post, deliveries, `{"text":"x"}`, "", nil, 400, "bad_request", "", "", ""},
		{"unknown field", post, deliveries, `{"alias":"live-alias","text":"x","color":"red"}`, "", nil, 400, "bad_request", "", "", ""},
		{"forged acceptedDeploymentId", post, deliveries, `{"alias":"live-alias","text":"x","acceptedDeploymentId":"v9"}`, "", nil, 400, "bad_request", "", "", ""},
		{"forged acceptedDeploymentId, case-folded", post, deliveries, `{"sessionId":"` + live + `","text":"x","AcceptedDeploymentID":"v9"}`, "", nil, 400, "bad_request", "", "", ""},
		{"forged acceptedDeploymentId on create", post, sessions, `{"acceptedDeploymentId":"v9"}`, "", nil, 400, "bad_request", "", "", ""},
		{"case-folded known field", post, deliveries, `{"SessionId":"` + live + `","text":"x"}`, "", nil, 400, "bad_request", "", "", ""},
		{"unknown mode", post, deliveries, `{"alias":"live-alias","text":"x","mode":"shout"}`, "", nil, 400, "bad_request", "", "", ""},
		{"oversize body", post, deliveries, big, "", nil, 413, "too_large", "", "", ""},
		{"too many payloads", post, deliveries, manyPayloads, "", nil, 413, "too_large", "", "", ""},
		{"over-long alias", post, deliveries, `{"alias":"` + strings.Repeat("a", subjects.MaxTokenLen+1) + `","text":"x"}`, "", nil, 400, "bad_request", "", "", ""},
		{"over-long escaped alias", post, deliveries, `{"alias":"` + strings.Repeat(".", subjects.MaxTokenLen/3+1) + `","text":"x"}`, "", nil, 400, "bad_request", "", "", ""},
		{"empty alias", post, deliveries, `{"alias":"","text":"x"}`, "", nil, 400, "bad_request", "", "", ""},
		{"text of the wrong type", post, deliveries, `{"alias":"live-alias","text":42}`, "", nil, 400, "bad_request", "", "", ""},
		{"payloads of the wrong type", post, deliveries, `{"alias":"live-alias","payloads":"x"}`, "", nil, 400, "bad_request", "", "", ""},
		{"text and payloads", post, deliveries, `{"alias":"live-alias","text":"x","payloads":[{"message":"y"}]}`, "", nil, 400, "bad_request", "", "", ""},
		{"no message", post, deliveries, `{"alias":"live-alias"}`, "", nil, 400, "bad_request", "", "", ""},
		{"empty payloads", post, deliveries, `{"alias":"new-alias","payloads":[]}`, "", nil, 400, "bad_request", "", "", ""},
		{"empty payload (to a new alias)", post, deliveries, `{"alias":"new-alias","payloads":[{}]}`, "", nil, 400, "bad_request", "", "", ""},
		{"invalid part (to a new alias)", post, deliveries, `{"alias":"new-alias","payloads":[{"message":[{"type":"image"}]}]}`, "", nil, 400, "bad_request", "", "", ""},
		{"unknown payload member", post, deliveries, `{"alias":"live-alias","payloads":[{"msg":"y"}]}`, "", nil, 400, "bad_request", "", "", ""},
		{"empty text", post, deliveries, `{"alias":"live-alias","text":""}`, "", nil, 400, "bad_request", "", "", ""},
		{"null member", post, deliveries, `{"alias":"live-alias","text":"x","caller":null}`, "", nil, 400, "bad_request", "", "", ""},
		{"repeated member", post, deliveries, `{"alias":"live-alias","text":"x","text":"y"}`, "", nil, 400, "bad_request", "", "", ""},
		{"trailing data", post, deliveries, `{"alias":"live-alias","text":"x"} {}`, "", nil, 400, "bad_request", "", "", ""},
		{"bad timeout", post, deliveries, `{"alias":"new-alias","text":"x","timeout":"forever"}`, "", nil, 400, "bad_request", "", "", ""},
		{"negative timeout", post, sessions, `{"timeout":"-1s"}`, "", nil, 400, "bad_request", "", "", ""},
		{"caller of the wrong type", post, deliveries, `{"alias":"live-alias","text":"x","caller":7}`, "", nil, 400, "bad_request", "", "", ""},
		{"over-long idempotencyKey", post, deliveries, `{"alias":"live-alias","text":"x","idempotencyKey":"` + longKey + `"}`, "", nil, 400, "bad_request", "", "", ""},
		{"empty idempotencyKey", post, deliveries, `{"alias":"new-alias","text":"x","idempotencyKey":""}`, "", nil, 400, "bad_request", "", "", ""},
		{"malformed session ID", post, deliveries, `{"sessionId":"a.b","text":"x"}`, "", nil, 400, "bad_request", "", "", ""},
		{"unknown session", post, deliveries, `{"sessionId":"` + unknown + `","text":"x"}`, "", nil, 404, "not_found", "", "", ""},
		{"ended session", post, deliveries, `{"sessionId":"` + gone + `","text":"x"}`, "", nil, 410, "gone", "", "", ""},
		{"alias of an ended session", post, deliveries, `{"alias":"gone-alias","text":"x"}`, "", nil, 410, "gone", "", "", ""},
		{"cancel an ended session", post, sessions + "/" + gone + "/cancel", ``, "", nil, 410, "gone", "", "", ""},
		{"cancel an unknown session", post, sessions + "/" + unknown + "/cancel", ``, "", nil, 404, "not_found", "", "", ""},
		{"control with an unknown field", post, sessions + "/" + live + "/reset", `{"mode":"queue"}`, "", nil, 400, "bad_request", "", "", ""},
		{"control naming the session in the body", post, sessions + "/" + live + "/clear", `{"sessionId":"` + live + `"}`, "", nil, 400, "bad_request", "", "", ""},
		{"input without requestId", post, sessions + "/" + live + "/input", `{"value":1}`, "", nil, 400, "bad_request", "", "", ""},
		{"input without value", post, sessions + "/" + live + "/input", `{"requestId":"r1"}`, "", nil, 400, "bad_request", "", "", ""},
		{"input to an unknown session", post, sessions + "/" + unknown + "/input", `{"requestId":"r1","value":1}`, "", nil, 404, "not_found", "", "", ""},
		{"authorize with a bad result", post, sessions + "/" + live + "/authorize", `{"attemptId":"a1","result":"maybe"}`, "", nil, 400, "bad_request", "", "", ""},
		{"create with a taken alias", post, sessions, `{"alias":"live-alias"}`, "", nil, 409, "conflict", "", "", ""},
		{"create with an ended session's alias", post, sessions, `{"alias":"gone-alias"}`, "", nil, 410, "gone", "", "", ""},
		{"create with a mode", post, sessions, `{"text":"x","mode":"steer"}`, "", nil, 400, "bad_request", "", "", ""},
		{"missing token", post, deliveries, `{"alias":"live-alias","text":"x"}`, "-", nil, 401, "unauthorized", "", "", ""},
		{"wrong token", post, deliveries, `{"alias":"live-alias","text":"x"}`, "not-a-token", nil, 401, "unauthorized", "", "", ""},
		{"admin token on /v1/", post, deliveries, `{"alias":"live-alias","text":"x"}`, "admin-token", nil, 401, "unauthorized", "", "", ""},
		{"missing token on events", get, sessions + "/" + live + "/events", ``, "-", nil, 401, "unauthorized", "", "", ""},
		{"bad after", get, sessions + "/" + live + "/events?after=-1", ``, "", nil, 400, "bad_request", "", "", ""},
		{"bad Last-Event-ID", get, sessions + "/" + live + "/events", ``, "", []string{"Last-Event-ID", "x"}, 400, "bad_request", "", "", ""},
		{"bad follow", get, sessions + "/" + live + "/events?follow=maybe", ``, "", nil, 400, "bad_request", "", "", ""},
		{"events of an unknown session", get, sessions + "/" + unknown + "/events", ``, "", nil, 404, "not_found", "", "", ""},
		{"status of an unknown session", get, sessions + "/" + unknown, ``, "", nil, 404, "not_found", "", "", ""},
		{"status of a malformed ID", get, sessions + "/a.b", ``, "", nil, 400, "bad_request", "", "", ""},
		{"unknown route", post, "/v1/sessions/" + live + "/explode", ``, "", nil, 404, "not_found", "", "", ""},
		// Reused idempotency key, another command: refused, not answered
		// with the first receipt.
		{"idempotencyKey reused with other text", post, deliveries, `{"sessionId":"` + live + `","text":"second","idempotencyKey":"idem-1"}`, "", nil, 409, "idempotency_conflict", `"idem-1"`, "", ""},
		{"idempotencyKey reused through the alias with other text", post, deliveries, `{"alias":"live-alias","text":"second","idempotencyKey":"idem-1"}`, "", nil, 409, "idempotency_conflict", "", "", ""},
		{"idempotencyKey reused with another mode", post, deliveries, `{"sessionId":"` + live + `","text":"first","mode":"steer","idempotencyKey":"idem-1"}`, "", nil, 409, "idempotency_conflict", "", "", ""},
		{"idempotencyKey reused for a control command", post, sessions + "/" + live + "/cancel", `{"idempotencyKey":"idem-1"}`, "", nil, 409, "idempotency_conflict", "", "", ""},
		// Answers to requests the session does not wait for.
		{"input for a request never made", post, sessions + "/" + live + "/input", `{"requestId":"r1","value":1}`, "", nil, 409, "unknown_request", `"r1"`, `[]`, ""},
		{"input for another request", post, sessions + "/" + asker + "/input", `{"requestId":"r-other","value":1}`, "", nil, 409, "unknown_request", "", `["` + ask + `"]`, ""},
		{"input answering an authorization", post, sessions + "/" + authz + "/input", `{"requestId":"` + attempt + `","value":1}`, "", nil, 409, "unknown_request", "", `[]`, ""},
		{"authorization for an attempt never made", post, sessions + "/" + live + "/authorize", `{"attemptId":"a1","result":"granted"}`, "", nil, 409, "unknown_request", "", `[]`, ""},
		{"authorization for another attempt", post, sessions + "/" + authz + "/authorize", `{"attemptId":"a-other","result":"denied"}`, "", nil, 409, "unknown_request", "", `["` + attempt + `"]`, ""},
		// A route that exists, with the wrong method.
		{"GET a POST route", get, deliveries, ``, "", nil, 405, "method_not_allowed", "GET", "", "POST"},
		{"PUT a session", http.MethodPut, sessions + "/" + live, ``, "", nil, 405, "method_not_allowed", "", "", "GET, HEAD, PATCH, DELETE"},
		{"DELETE a live session", http.MethodDelete, sessions + "/" + live, ``, "", nil, 409, "session_live", "?force=true", "", ""},
		{"GET a control route", get, sessions + "/" + live + "/cancel", ``, "", nil, 405, "method_not_allowed", "", "", "POST"},
		{"PUT an admin route", http.MethodPut, "/v1/admin/sessions/" + live + "/move", ``, "admin-token", nil, 405, "method_not_allowed", "", "", "POST"},
		// Decoder errors in plain words, naming the field.
		{"not JSON", post, deliveries, `hello`, "", nil, 400, "bad_request", "want a JSON value", "", ""},
		{"a bare word for a string", post, deliveries, `{"alias":"live-alias","text":nope}`, "", nil, 400, "bad_request", `field "text": malformed JSON: unexpected 'o', not a JSON value`, "", ""},
		{"a missing comma", post, deliveries, `{"alias":"live-alias" "text":"x"}`, "", nil, 400, "bad_request", `want ',' or '}' after the member "alias"`, "", ""},
		{"a trailing comma", post, deliveries, `{"alias":"live-alias","text":"x",}`, "", nil, 400, "bad_request", "want a member name in double quotes", "", ""},
		{"an unquoted member name", post, deliveries, `{alias:"live-alias"}`, "", nil, 400, "bad_request", "want a member name in double quotes", "", ""},
		{"a malformed number", post, sessions + "/" + live + "/input", `{"requestId":"r1","value":1.}`, "", nil, 400, "bad_request", `field "value": malformed JSON`, "", ""},
		{"a message of the wrong type", post, deliveries, `{"alias":"live-alias","payloads":[{"message":5}]}`, "", nil, 400, "bad_request", `payloads[0]: field "message": message must be a string or an array of parts`, "", ""},
		{"an unknown member of a part", post, deliveries, `{"alias":"live-alias","payloads":[{"message":[{"type":"text","txt":"x"}]}]}`, "", nil, 400, "bad_request", `field "message": unknown field "txt"`, "", ""},
		{"a body that ends early", post, deliveries, `{"alias":"live-alias","text":"x"`, "", nil, 400, "bad_request", "ends too early", "", ""},
		{"lower-case scheme, wrong token", post, deliveries, `{"alias":"live-alias","text":"x"}`, "-", []string{"Authorization", "bearer not-a-token"}, 401, "unauthorized", "unknown bearer token", "", ""},
		{"another scheme", post, deliveries, `{"alias":"live-alias","text":"x"}`, "-", []string{"Authorization", "Basic " + testToken}, 401, "unauthorized", "missing bearer token", "", ""},
	}
	if len(rows) < 25 {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range rows {
		token := testToken
		switch r.token {
		case "-":
			token = ""
		case "":
		default:
			token = r.token
		}
		before := e.durable()
		status, h, b := e.callHeader(r.method, r.path, r.body, token, r.hdr...)
		var eb ingress.ErrorBody
		err := json.Unmarshal(b, &eb)
		if status != r.status || err != nil || eb.Error.Code != r.code || eb.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d %s", r.name, status, clipped(b), r.status, r.code)
			continue
		}
		if !strings.Contains(eb.Error.Message, r.msg) {
			t.Errorf("%s: message %q lacks %q", r.name, eb.Error.Message, r.msg)
		}
		for _, goText := range []string{"invalid character", "literal null", "looking for beginning", "json:", "wire:", "expecting"} {
			if strings.Contains(eb.Error.Message, goText) {
				t.Errorf("%s: message %q quotes the decoder (%q)", r.name, eb.Error.Message, goText)
			}
		}
		if exp, _ := json.Marshal(eb.Error.Expected); r.expected != "" && (string(exp) != r.expected || !strings.Contains(string(b), `"expected":`)) {
			t.Errorf("%s: expected %s in %s, want %s", r.name, exp, b, r.expected)
		}
		if got := h.Get("Allow"); got != r.allow {
			t.Errorf("%s: Allow %q, want %q", r.name, got, r.allow)
		}
		if after := e.durable(); !equalDurable(before, after) {
			t.Errorf("%s: a refused request wrote: %v -> %v", r.name, before, after)
		}
	}
	// Nothing was created for any of the refused new aliases.
	for _, alias := range []string{"new-alias"} {
		tok, _ := subjects.EncodeToken(alias)
		if _, _, err := e.Store.GetHook(t.Context(), tok); !errors.Is(err, record.ErrNotFound) {
			t.Fatalf("alias %s was claimed: %v", alias, err)
		}
	}
	// The first keyed delivery's receipt is unchanged by the refused reuses.
	if again := e.deliver(`{"sessionId":"` + live + `","text":"first","idempotencyKey":"idem-1"}`); again != first {
		t.Fatalf("repeat of the keyed delivery = %+v, first %+v", again, first)
	}
	// The scheme is case-insensitive; the token is not.
	for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		if code, b := e.call(get, sessions+"/"+live, "", "", "Authorization", scheme+" "+testToken); code != http.StatusOK {
			t.Errorf("Authorization: %s <token>: %d %s", scheme, code, b)
		}
	}
	if code, _ := e.call(get, sessions+"/"+live, "", "", "Authorization", "Bearer "+strings.ToUpper(testToken)); code != http.StatusUnauthorized {
		t.Errorf("an upper-cased token: %d, want 401", code)
	}
}

func clipped(b []byte) string {
	if len(b) > 200 {
		return fmt.Sprintf("%s… (%d bytes)", b[:200], len(b))
	}
	return string(b)
}
