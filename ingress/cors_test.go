package ingress_test

import (
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	appOrigin  = "https://app.example.com"
	evilOrigin = "https://evil.example.com"
	noSession  = "/v1/sessions/01JZZZZZZZZZZZZZZZZZZZZZZZ"
)

// corsHeaders are the Access-Control-* headers of an answer.
func corsHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			out[k] = strings.Join(v, ", ")
		}
	}
	return out
}

// preflight sends a browser's preflight of method on path from origin, with
// no bearer token.
func (e *env) preflight(path, origin, method string) (int, http.Header, []byte) {
	e.t.Helper()
	return e.callHeader(http.MethodOptions, path, "", "", "Origin", origin,
		"Access-Control-Request-Method", method, "Access-Control-Request-Headers", "authorization")
}

func checkCORS(t *testing.T, what string, h http.Header, want map[string]string) {
	t.Helper()
	if got := corsHeaders(h); !maps.Equal(got, want) {
		t.Errorf("%s: CORS headers %v, want exactly %v", what, got, want)
	}
}

// An allowed origin: a preflight is 204 with the path's methods and no
// bearer token; an actual request gets its origin back, never "*" and never
// Access-Control-Allow-Credentials. A path without routes is 404 as ever.
func TestCORSAllowedOrigin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ingress.Config) { c.CORSOrigins = []string{"http://localhost:3000", appOrigin} })
	paths := map[string]string{
		"/v1/deliveries":            "POST",
		noSession:                   "GET, HEAD, PATCH, DELETE",
		noSession + "/events":       "GET, HEAD",
		noSession + "/stream-token": "POST",
		"/v1/admin/deployments":     "GET, HEAD",
		"/v1/sessions/x/events?a=1": "GET, HEAD",
	}
	for path, methods := range paths {
		code, h, b := e.preflight(path, appOrigin, "POST")
		if code != http.StatusNoContent || len(b) != 0 || h.Get("Vary") != "Origin" {
			t.Fatalf("preflight %s = %d %v %s, want 204 with Vary: Origin", path, code, h, b)
		}
		checkCORS(t, "preflight "+path, h, map[string]string{
			"Access-Control-Allow-Origin":  appOrigin,
			"Access-Control-Allow-Methods": methods,
			"Access-Control-Allow-Headers": "Authorization, Content-Type, Last-Event-ID",
			"Access-Control-Max-Age":       "600",
		})
	}
	code, h, b := e.preflight("/v1/nothing/here", appOrigin, "GET")
	if code != http.StatusNotFound || errCode(b) != ingress.CodeNotFound {
		t.Fatalf("preflight of a path without routes = %d %s, want 404 not_found", code, b)
	}
	checkCORS(t, "preflight without route", h, map[string]string{
		"Access-Control-Allow-Origin": appOrigin, "Access-Control-Expose-Headers": "WWW-Authenticate, Allow"})

	exposed := map[string]string{"Access-Control-Allow-Origin": appOrigin, "Access-Control-Expose-Headers": "WWW-Authenticate, Allow"}
	code, h, b = e.callHeader(http.MethodGet, noSession, "", testToken, "Origin", appOrigin)
	if code != http.StatusNotFound || errCode(b) != ingress.CodeNotFound || h.Get("Vary") != "Origin" {
		t.Fatalf("GET from an allowed origin = %d %v %s", code, h, b)
	}
	checkCORS(t, "GET", h, exposed)
	code, h, _ = e.callHeader(http.MethodGet, noSession, "", "", "Origin", appOrigin)
	if code != http.StatusUnauthorized || h.Get("WWW-Authenticate") == "" {
		t.Fatalf("GET without a token = %d %v, want 401 with WWW-Authenticate", code, h)
	}
	checkCORS(t, "401", h, exposed)
	code, h, _ = e.callHeader(http.MethodGet, "/healthz", "", "", "Origin", "http://localhost:3000")
	if code != http.StatusOK {
		t.Fatalf("healthz = %d", code)
	}
	checkCORS(t, "healthz, the other origin", h, map[string]string{
		"Access-Control-Allow-Origin": "http://localhost:3000", "Access-Control-Expose-Headers": "WWW-Authenticate, Allow"})
	// An OPTIONS that is no preflight (no Access-Control-Request-Method)
	// is what it always was: 405.
	code, h, _ = e.callHeader(http.MethodOptions, "/v1/deliveries", "", testToken, "Origin", appOrigin)
	if code != http.StatusMethodNotAllowed || h.Get("Allow") != "POST" {
		t.Fatalf("plain OPTIONS = %d %v, want 405 Allow: POST", code, h)
	}
	checkPreflightMetric(t, e.reg, "204", float64(len(paths)))
}

// An origin not in the list: its preflight is 403 cors_origin_refused, its
// actual requests are served as without CORS, and no answer carries a CORS
// header (the browser blocks the script).
func TestCORSRefusedOrigin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ingress.Config) { c.CORSOrigins = []string{appOrigin} })
	for _, origin := range []string{evilOrigin, appOrigin + ":8443", "http://app.example.com", "null"} {
		code, h, b := e.preflight("/v1/deliveries", origin, "POST")
		if code != http.StatusForbidden || errCode(b) != ingress.CodeCORSOriginRefused {
			t.Fatalf("preflight from %s = %d %s, want 403 cors_origin_refused", origin, code, b)
		}
		checkCORS(t, "refused preflight", h, map[string]string{})
	}
	code, h, b := e.callHeader(http.MethodGet, noSession, "", testToken, "Origin", evilOrigin)
	if code != http.StatusNotFound || errCode(b) != ingress.CodeNotFound {
		t.Fatalf("GET from a refused origin = %d %s, want 404 as without CORS", code, b)
	}
	checkCORS(t, "GET from a refused origin", h, map[string]string{})
	code, h, _ = e.callHeader(http.MethodGet, noSession, "", testToken)
	if code != http.StatusNotFound {
		t.Fatalf("GET without Origin = %d", code)
	}
	checkCORS(t, "GET without Origin", h, map[string]string{})
	checkPreflightMetric(t, e.reg, "403", 4)
}

// Without CORSOrigins nothing changes: a preflight is the 405 of any
// OPTIONS, and no answer has a CORS header or Vary: Origin.
func TestCORSDisabled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	code, h, b := e.preflight("/v1/deliveries", appOrigin, "POST")
	if code != http.StatusMethodNotAllowed || errCode(b) != ingress.CodeMethodNotAllowed || h.Get("Allow") != "POST" {
		t.Fatalf("preflight without CORS = %d %v %s, want 405 Allow: POST", code, h, b)
	}
	checkCORS(t, "preflight without CORS", h, map[string]string{})
	code, h, _ = e.callHeader(http.MethodGet, noSession, "", testToken, "Origin", appOrigin)
	if code != http.StatusNotFound || h.Get("Vary") != "" {
		t.Fatalf("GET without CORS = %d %v", code, h)
	}
	checkCORS(t, "GET without CORS", h, map[string]string{})
}

// An allowed origin is written as a browser sends Origin; anything else is
// refused by name, and New refuses it too.
func TestCORSOriginCheck(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{appOrigin, "http://localhost:3000", "http://[::1]:8080", "https://app.example.com:8443"} {
		if err := ingress.CheckCORSOrigin(ok); err != nil {
			t.Errorf("CheckCORSOrigin(%q) = %v", ok, err)
		}
	}
	for bad, why := range map[string]string{
		"*":                           "wildcards",
		"https://*.example.com":       "wildcards",
		"https://app.example.com/":    "no path",
		"https://app.example.com/ui":  "no path",
		"https://app.example.com?x":   "query",
		"https://u@app.example.com":   "user",
		"https://App.Example.com":     `"https://app.example.com"`,
		"HTTPS://app.example.com":     `"https://app.example.com"`,
		"https://app.example.com:443": `"https://app.example.com"`,
		"http://localhost:0":          "port",
		"app.example.com":             "scheme://host",
		"localhost:3000":              "scheme://host",
		"null":                        "scheme://host",
		"":                            "scheme://host",
	} {
		if err := ingress.CheckCORSOrigin(bad); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("CheckCORSOrigin(%q) = %v, want an error about %s", bad, err, why)
		}
	}
	h := harness.For(t)
	nc, js := h.Connect(h.Server().URL())
	_, err := ingress.New(ingress.Config{NC: nc, JS: js, Deployment: "v1", InsecureDev: true,
		CORSOrigins: []string{appOrigin, "*"}, Registerer: prometheus.NewRegistry()})
	if err == nil || !strings.Contains(err.Error(), "wildcards") {
		t.Fatalf("New with origin * = %v, want refused", err)
	}
}

// checkPreflightMetric checks the count of preflights the CORS layer
// answered with status.
func checkPreflightMetric(t *testing.T, reg *prometheus.Registry, status string, want float64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "baton_ingress_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			if l["route"] == "OPTIONS (CORS preflight)" && l["status"] == status {
				if got := m.GetCounter().GetValue(); got != want {
					t.Errorf("preflights %s counted %v, want %v", status, got, want)
				}
				return
			}
		}
	}
	t.Errorf("no preflight %s counted, want %v", status, want)
}
