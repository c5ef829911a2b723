package ingress_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/baton-rt/baton/ingress"
)

// With Config.UI the ingress serves the inspector at /ui/ without a
// token (the API around it still wants one) and redirects /ui there;
// without it, both are the API's 404.
func TestUI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ingress.Config) { c.UI = true })
	code, hdr, body := e.callHeader(http.MethodGet, "/ui/", "", "")
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") || !strings.Contains(string(body), "app.js") {
		t.Fatalf("GET /ui/ = %d %q %.80s, want 200 text/html", code, hdr.Get("Content-Type"), body)
	}
	if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("GET /ui/: Content-Security-Policy %q", csp)
	}
	if code, hdr, _ := e.callHeader(http.MethodGet, "/ui/app.js", "", ""); code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/javascript") {
		t.Errorf("GET /ui/app.js = %d %q, want 200 text/javascript", code, hdr.Get("Content-Type"))
	}
	if code, _ := e.call(http.MethodGet, "/ui/nope.js", "", ""); code != http.StatusNotFound {
		t.Errorf("GET /ui/nope.js = %d, want 404", code)
	}
	if code, _ := e.call(http.MethodGet, "/v1/sessions/01JZZZZZZZZZZZZZZZZZZZZZZZ", "", ""); code != http.StatusUnauthorized {
		t.Errorf("the API without a token = %d, want 401", code)
	}
	// The coverage test leaves the inspector's routes out as non-API paths.
	for _, pattern := range e.ing.Routes() {
		if strings.Contains(pattern, "/ui") && !exemptRoutes[pattern] {
			t.Errorf("route %q is not in exemptRoutes (openapi_test.go)", pattern)
		}
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(e.ing.URL() + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /ui = %d Location %q, want 301 to /ui/", resp.StatusCode, resp.Header.Get("Location"))
	}
	if code, _ := e.call(http.MethodPost, "/ui/", "", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/ = %d, want 405", code)
	}

	off := newEnv(t)
	for _, p := range []string{"/ui/", "/ui", "/ui/app.js"} {
		if code, body := off.call(http.MethodGet, p, "", testToken); code != http.StatusNotFound || !strings.Contains(string(body), `"not_found"`) {
			t.Errorf("without Config.UI: GET %s = %d %s, want the API's 404", p, code, body)
		}
	}
}
