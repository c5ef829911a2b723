package ingress_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	key1 = []byte("stream-token-key-one-0123456789abcdef")
	key2 = []byte("stream-token-key-two-0123456789abcdef")
)

// offsetClock is a Config.Now that tests move forward.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

// set moves the clock to t.
func (c *offsetClock) set(t time.Time) { c.off.Store(int64(time.Until(t))) }

// withKeys configures stream token keys.
func withKeys(keys ...[]byte) func(*ingress.Config) {
	return func(c *ingress.Config) { c.StreamTokenKeys = keys }
}

// mint asks for a stream token of session id with the test bearer token.
func (e *env) mint(id string) ingress.StreamToken {
	e.t.Helper()
	return mintAt(e, e.ing.URL(), id)
}

func mintAt(e *env, base, id string) ingress.StreamToken {
	e.t.Helper()
	r, err := e.http.Do(e.t.Context(), http.MethodPost, base+"/v1/sessions/"+id+"/stream-token", nil, harness.Bearer(testToken))
	e.h.Check(err)
	if r.Code != http.StatusOK {
		e.t.Fatalf("stream-token %s = %d %s, want 200", id, r.Code, r.Body)
	}
	var tok ingress.StreamToken
	if err := json.Unmarshal(r.Body, &tok); err != nil || tok.Token == "" {
		e.t.Fatalf("stream-token %s: %v %s", id, err, r.Body)
	}
	return tok
}

// eventsWith reads a session's events with ?token= and no bearer token.
func (e *env) eventsWith(id, tok string) (int, http.Header, []byte) {
	e.t.Helper()
	return e.callHeader(http.MethodGet, "/v1/sessions/"+id+"/events?follow=false&token="+tok, "", "")
}

// wantRefused checks a 401 with code and WWW-Authenticate, whose message
// does not quote the token's signature.
func wantRefused(t *testing.T, what string, code int, h http.Header, b []byte, want string) {
	t.Helper()
	if code != http.StatusUnauthorized || errCode(b) != want || h.Get("WWW-Authenticate") == "" {
		t.Fatalf("%s = %d %v %s, want 401 %s with WWW-Authenticate", what, code, h, b, want)
	}
	if m := macPart.FindString(string(b)); m != "" {
		t.Fatalf("%s: the refusal quotes a token: %s", what, b)
	}
}

// macPart is what a token's signature looks like (43 base64url characters).
var macPart = regexp.MustCompile(`[A-Za-z0-9_-]{43}`)

// A stream token minted with the bearer token reads the session's events
// without it, as JSON and as SSE, until it expires; its expiry is the
// ingress's clock plus the TTL. A body other than empty or {} is refused.
func TestStreamTokenIssueAndUse(t *testing.T) {
	t.Parallel()
	clk := &offsetClock{}
	e := newEnv(t, withKeys(key1), func(c *ingress.Config) { c.Now, c.StreamTokenTTL = clk.Now, 2*time.Minute })
	e.owner("v1", "p1")
	id := e.create(`{"alias":"tok","text":"hello"}`).SessionID
	e.waitEvents(id, "hello", func(evs []wire.Event) bool { return len(harness.Outputs(evs)) == 1 })

	before := time.Now()
	tok := e.mint(id)
	if d := tok.ExpiresAt.Sub(before); d < 2*time.Minute-time.Second || d > 2*time.Minute+time.Second ||
		tok.ExpiresAt.Location() != time.UTC || tok.ExpiresAt.Nanosecond() != 0 {
		t.Fatalf("expiresAt %v: want now+2m in UTC, whole seconds", tok.ExpiresAt)
	}
	code, _, b := e.eventsWith(id, tok.Token)
	var evs []json.RawMessage
	if code != http.StatusOK || json.Unmarshal(b, &evs) != nil || len(evs) == 0 {
		t.Fatalf("events with the token = %d %s", code, b)
	}
	s := e.h.SSE(e.ing.URL() + "/v1/sessions/" + id + "/events?token=" + tok.Token)
	until(t, s, 10*time.Second, "hello", isOutput("hello"))
	e.deliver(`{"alias":"tok","text":"live"}`)
	until(t, s, 10*time.Second, "live", isOutput("live"))

	for _, body := range []string{"{}", " { } \n"} {
		if code, b := e.post("/v1/sessions/"+id+"/stream-token", body); code != http.StatusOK {
			t.Fatalf("stream-token with body %q = %d %s", body, code, b)
		}
	}
	for _, body := range []string{`{"ttl":"1h"}`, "[]", "{} {}"} {
		if code, b := e.post("/v1/sessions/"+id+"/stream-token", body); code != http.StatusBadRequest {
			t.Fatalf("stream-token with body %q = %d %s, want 400", body, code, b)
		}
	}
	if code, b := e.call(http.MethodPost, "/v1/sessions/"+id+"/stream-token", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("stream-token without a bearer token = %d %s, want 401", code, b)
	}
	if code, b := e.post("/v1/sessions/01JZZZZZZZZZZZZZZZZZZZZZZZ/stream-token", ""); code != http.StatusNotFound || errCode(b) != ingress.CodeNotFound {
		t.Fatalf("stream-token of an unknown session = %d %s, want 404 not_found", code, b)
	}

	clk.set(tok.ExpiresAt.Add(-2 * time.Second))
	if code, _, b := e.eventsWith(id, tok.Token); code != http.StatusOK {
		t.Fatalf("events just before the expiry = %d %s", code, b)
	}
	clk.set(tok.ExpiresAt)
	code, h, b := e.eventsWith(id, tok.Token)
	wantRefused(t, "an expired token", code, h, b, ingress.CodeTokenExpired)
	if _, err := harness.OpenSSE(http.DefaultClient, e.ing.URL()+"/v1/sessions/"+id+"/events?token="+tok.Token); err == nil ||
		!strings.Contains(err.Error(), "401") {
		t.Fatalf("SSE with an expired token: %v, want 401", err)
	}
	// A valid bearer token still works, whatever the ?token=.
	if code, _, b := e.callHeader(http.MethodGet, "/v1/sessions/"+id+"/events?follow=false&token="+tok.Token, "", testToken); code != http.StatusOK {
		t.Fatalf("bearer with an expired ?token= = %d %s", code, b)
	}
}

// A token is refused when it is tampered with, signed by another key, for
// another session, or used on another route (there ?token= is no auth).
func TestStreamTokenRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withKeys(key1))
	e.owner("v1", "p1")
	a := e.create(`{"alias":"a"}`).SessionID
	b := e.create(`{"alias":"b"}`).SessionID
	tok := e.mint(a).Token
	if code, _, body := e.eventsWith(a, tok); code != http.StatusOK {
		t.Fatalf("the token on its session = %d %s", code, body)
	}
	code, h, body := e.eventsWith(b, tok)
	wantRefused(t, "session A's token on session B", code, h, body, ingress.CodeTokenInvalid)

	for i := range tok {
		if tok[i] == '.' {
			continue
		}
		flipped := []byte(tok)
		flipped[i] = map[bool]byte{true: 'B', false: 'A'}[flipped[i] == 'A']
		code, h, body := e.eventsWith(a, string(flipped))
		wantRefused(t, fmt.Sprintf("the token with character %d changed", i), code, h, body, ingress.CodeTokenInvalid)
	}
	parts := strings.Split(tok, ".")
	for what, bad := range map[string]string{
		"empty":                 "",
		"no mac":                parts[0] + "." + parts[1],
		"version v2":            "v2." + parts[1] + "." + parts[2],
		"extra part":            tok + ".x",
		"garbage":               "not-a-token",
		"padded mac":            tok + "=",
		"long":                  tok + strings.Repeat("A", 600),
		"other mac":             parts[0] + "." + parts[1] + "." + strings.Split(e.mint(b).Token, ".")[2],
		"swapped pay":           parts[0] + "." + strings.Split(e.mint(b).Token, ".")[1] + "." + parts[2],
		"mac spelled otherwise": parts[0] + "." + parts[1] + "." + respell(parts[2]),
		// Signed right, by the test (docs/api.md gives the format):
		"other key":         forge(key2, "v1", fmt.Sprintf("%d.%s", time.Now().Add(time.Minute).Unix(), a)),
		"version v2 signed": forge(key1, "v2", fmt.Sprintf("%d.%s", time.Now().Add(time.Minute).Unix(), a)),
		"no expiry":         forge(key1, "v1", a),
		"bad expiry":        forge(key1, "v1", "soon."+a),
		"other session":     forge(key1, "v1", fmt.Sprintf("%d.%s", time.Now().Add(time.Minute).Unix(), b)),
	} {
		code, h, body := e.eventsWith(a, bad)
		wantRefused(t, what, code, h, body, ingress.CodeTokenInvalid)
	}
	// Elsewhere ?token= is not read: bearer auth as ever.
	for _, path := range []string{"/v1/sessions/" + a + "?token=" + tok, "/v1/sessions/" + a + "/commands/1?token=" + tok} {
		code, body := e.call(http.MethodGet, path, "", "")
		if code != http.StatusUnauthorized || errCode(body) != ingress.CodeUnauthorized {
			t.Fatalf("GET %s without bearer = %d %s, want 401 unauthorized", path, code, body)
		}
	}
	if code, body := e.call(http.MethodPost, "/v1/sessions/"+a+"/cancel?token="+tok, "", ""); code != http.StatusUnauthorized {
		t.Fatalf("cancel with ?token= = %d %s, want 401", code, body)
	}
	// A deleted session answers as its events route does.
	e.deleteSession(b, "?force=true")
	for _, c := range [][2]string{{http.MethodPost, "/stream-token"}, {http.MethodGet, "/events"}} {
		if code, body := e.call(c[0], "/v1/sessions/"+b+c[1], "", testToken); code != http.StatusGone || errCode(body) != "deleted" {
			t.Fatalf("%s of a deleted session = %d %s, want 410 deleted", c[1], code, body)
		}
	}
}

// forge signs a token of the documented format: version, payload (before
// its base64url encoding) and the HMAC-SHA256 of "<version>.<payload>".
func forge(key []byte, version, payload string) string {
	signed := version + "." + base64.RawURLEncoding.EncodeToString([]byte(payload))
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	return signed + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// respell is s, base64url without padding, spelled otherwise: its last
// character's unused low bit set, which a lenient decoder reads as the
// same bytes.
func respell(s string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, s[len(s)-1])
	return s[:len(s)-1] + string(alphabet[last^1])
}

// Rotation: a token signed with the second key verifies; new tokens are
// signed with the first. Two ingresses of one topology: keys [k2, k1]
// mints, [k1, k2] verifies, [k1] alone refuses it.
func TestStreamTokenKeyRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, withKeys(key1, key2))
	e.owner("v1", "p1")
	id := e.create(`{"alias":"rot"}`).SessionID
	other := func(keys ...[]byte) *harness.Ingress {
		return e.h.Ingress(e.URL, ingress.Config{Deployment: "v1", Tokens: []string{testToken},
			Registerer: prometheus.NewRegistry(), StreamTokenKeys: keys, Log: e.h.Logger(slog.LevelInfo)})
	}
	old := other(key2, key1)
	only1 := other(key1)
	tok := mintAt(e, old.URL(), id).Token
	if code, _, b := e.eventsWith(id, tok); code != http.StatusOK {
		t.Fatalf("a token of the second key = %d %s, want 200", code, b)
	}
	r, err := e.http.Do(e.t.Context(), http.MethodGet, only1.URL()+"/v1/sessions/"+id+"/events?follow=false&token="+tok, nil)
	e.h.Check(err)
	wantRefused(t, "a token of an unknown key", r.Code, r.Header, r.Body, ingress.CodeTokenInvalid)
	fresh := e.mint(id).Token
	r, err = e.http.Do(e.t.Context(), http.MethodGet, only1.URL()+"/v1/sessions/"+id+"/events?follow=false&token="+fresh, nil)
	e.h.Check(err)
	if r.Code != http.StatusOK {
		t.Fatalf("a new token, verified with the first key alone = %d %s: not signed with the first key", r.Code, r.Body)
	}
}

// Without keys the mint route is 404 stream_tokens_disabled and ?token= on
// the events route is invalid.
func TestStreamTokenDisabled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"off"}`).SessionID
	code, b := e.post("/v1/sessions/"+id+"/stream-token", "")
	if code != http.StatusNotFound || errCode(b) != ingress.CodeStreamTokensDisabled {
		t.Fatalf("stream-token without keys = %d %s, want 404 stream_tokens_disabled", code, b)
	}
	code, h, b := e.eventsWith(id, "v1.AAAA.AAAA")
	wantRefused(t, "?token= without keys", code, h, b, ingress.CodeTokenInvalid)
}

// New refuses keys and TTLs out of bounds; the key file wants one or two
// keys of at least 32 bytes.
func TestStreamTokenConfig(t *testing.T) {
	t.Parallel()
	h := harness.For(t)
	nc, js := h.Connect(h.Server().URL())
	long := bytes.Repeat([]byte("k"), 32)
	for what, c := range map[string]ingress.Config{
		"three keys": {StreamTokenKeys: [][]byte{long, long, long}},
		"short key":  {StreamTokenKeys: [][]byte{long, []byte("short")}},
		"ttl 2h":     {StreamTokenKeys: [][]byte{long}, StreamTokenTTL: 2 * time.Hour},
	} {
		c.NC, c.JS, c.Deployment, c.InsecureDev, c.Registerer = nc, js, "v1", true, prometheus.NewRegistry()
		if _, err := ingress.New(c); err == nil {
			t.Errorf("New with %s: no error", what)
		}
	}
	dir := t.TempDir()
	for what, tc := range map[string]struct {
		content string
		keys    int
		err     string
	}{
		"one":     {"# signing key\n" + string(long) + "\n", 1, ""},
		"two":     {"  " + string(long) + "  \n\n# previous\n" + string(long) + "x\n", 2, ""},
		"three":   {string(long) + "\n" + string(long) + "\n" + string(long) + "\n", 0, "want 1 or 2"},
		"short":   {string(long) + "\nshort-key\n", 0, "key 2 is 9 bytes: want at least 32"},
		"empty":   {"# nothing yet\n", 0, "holds no key"},
		"space":   {string(long) + " x\n", 0, "whitespace"},
		"no file": {"", 0, "no such file"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(what, " ", "-"))
		if what != "no file" {
			h.Check(os.WriteFile(path, []byte(tc.content), 0o600))
		}
		keys, err := ingress.LoadStreamTokenKeys(path)
		if tc.err == "" && (err != nil || len(keys) != tc.keys || !bytes.Equal(keys[0], long)) ||
			tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %d keys, %v; want %d keys or an error with %q", what, len(keys), err, tc.keys, tc.err)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The access log has a line per request at DEBUG, with the token value
// REDACTED; the token is nowhere in what the ingress logged, whether it
// was accepted, refused or sent where it is not read.
func TestAccessLogRedactsToken(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	e := newEnv(t, withKeys(key1), func(c *ingress.Config) {
		c.Log = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	e.owner("v1", "p1")
	id := e.create(`{"alias":"logged"}`).SessionID
	tok := e.mint(id).Token
	if code, _, b := e.eventsWith(id, tok); code != http.StatusOK {
		t.Fatalf("events = %d %s", code, b)
	}
	s := e.h.SSE(e.ing.URL() + "/v1/sessions/" + id + "/events?after=0&token=" + tok)
	until(t, s, 10*time.Second, "session.created", func(f harness.Frame) bool { return f.ID > 0 })
	s.Close()
	e.eventsWith(id, tok+"x")
	e.eventsWith(id+"x", tok)
	e.call(http.MethodGet, "/v1/sessions/"+id+"?token="+tok, "", "")
	e.call(http.MethodGet, "/v1/sessions/"+id+"/events?follow=false&x=1;token="+tok, "", testToken)
	e.call(http.MethodGet, "/v1/sessions/"+id+"/events?follow=false&Token="+tok, "", testToken)

	// query → a status it was logged with.
	want := map[string]float64{
		"follow=false&token=REDACTED":     401, // (and 200)
		"after=0&token=REDACTED":          200, // the SSE request, logged when it ended
		"token=REDACTED":                  401,
		"follow=false&x=1;token=REDACTED": 200, // Go reads no x nor token here
		"follow=false&Token=REDACTED":     200,
	}
	e.eventually(5*time.Second, "an access log line of each request", func() bool {
		seen := 0
		for q, status := range want {
			if slices.ContainsFunc(accessLines(t, logs.String()), func(l map[string]any) bool { return l["query"] == q && l["status"] == status }) {
				seen++
			}
		}
		return seen == len(want)
	})
	for _, l := range accessLines(t, logs.String()) {
		if l["level"] != "DEBUG" || l["method"] == nil || l["path"] == nil || l["status"] == nil || l["duration"] == nil || l["deployment"] != "v1" {
			t.Errorf("access log line without level DEBUG, method, path, status, duration or deployment: %v", l)
		}
	}
	if all := logs.String(); strings.Contains(all, tok) || strings.Contains(all, strings.Split(tok, ".")[2]) {
		t.Fatalf("the token is in the log:\n%s", all)
	}
}

// accessLines are the "http request" lines of a JSON log.
func accessLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "http request" {
			out = append(out, m)
		}
	}
	return out
}
