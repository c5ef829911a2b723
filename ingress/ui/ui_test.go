package ui_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/baton-rt/baton/ingress/ui"
)

func serve(t *testing.T, method, path string, hdr ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	ui.Handler().ServeHTTP(w, req)
	return w.Result()
}

func body(t *testing.T, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkHeaders holds an answer to the headers every answer carries.
func checkHeaders(t *testing.T, what string, r *http.Response) {
	t.Helper()
	want := "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'"
	if got := r.Header.Get("Content-Security-Policy"); got != want {
		t.Errorf("%s: Content-Security-Policy %q, want %q", what, got, want)
	}
	if got := r.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("%s: X-Content-Type-Options %q, want nosniff", what, got)
	}
}

// The app's page is served at /ui/ itself, with the headers that keep it
// to its own origin and make a reload revalidate.
func TestIndex(t *testing.T) {
	r := serve(t, http.MethodGet, "/ui/")
	b := body(t, r)
	if r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET /ui/ = %d %q", r.StatusCode, r.Header.Get("Content-Type"))
	}
	checkHeaders(t, "/ui/", r)
	if got := r.Header.Get("Cache-Control"); got != "no-cache" {
		t.Errorf("Cache-Control %q, want no-cache", got)
	}
	if !strings.Contains(b, `<script type="module" src="app.js"></script>`) || !strings.Contains(b, `id="auth"`) {
		t.Errorf("/ui/ is not the app's index.html:\n%s", b)
	}
	if index := body(t, serve(t, http.MethodGet, "/ui/index.html")); index != b {
		t.Error("/ui/index.html differs from /ui/")
	}
	etag := r.Header.Get("ETag")
	if re := serve(t, http.MethodGet, "/ui/", "If-None-Match", etag); etag == "" || re.StatusCode != http.StatusNotModified {
		t.Errorf("ETag %q: a revalidation answered %d, want 304", etag, re.StatusCode)
	}
}

// The CSP allows no inline script or style: the page holds neither, and
// every script and style sheet it loads is an embedded file.
func TestIndexHasNothingInline(t *testing.T) {
	b := body(t, serve(t, http.MethodGet, "/ui/"))
	for _, re := range []string{`<script(?:\s[^>]*)?>[^<]`, `<style`, `\sstyle=`, `\son[a-z]+=`, `javascript:`, `https?://`} {
		if m := regexp.MustCompile(re).FindString(b); m != "" {
			t.Errorf("index.html holds %q (matches %s): the CSP would refuse it", m, re)
		}
	}
	files := ui.Files()
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"#:]+)"`).FindAllStringSubmatch(b, -1) {
		if !slices.Contains(files, m[1]) {
			t.Errorf("index.html loads %q, which is not embedded (%v)", m[1], files)
		}
	}
}

// Every embedded file is served with its type: modules as JavaScript
// (browsers refuse a module of another type under nosniff).
func TestEveryFileTyped(t *testing.T) {
	types := map[string]string{".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	files := ui.Files()
	for _, want := range []string{"index.html", "app.js", "api.js", "style.css"} {
		if !slices.Contains(files, want) {
			t.Errorf("%s is not embedded (%v)", want, files)
		}
	}
	for _, f := range files {
		r := serve(t, http.MethodGet, "/ui/"+f)
		want, ok := types[f[strings.LastIndex(f, "."):]]
		if !ok {
			t.Errorf("%s: an embedded file of no known type", f)
			continue
		}
		if r.StatusCode != http.StatusOK || r.Header.Get("Content-Type") != want || len(body(t, r)) == 0 {
			t.Errorf("GET /ui/%s = %d %q, want 200 %q with a body", f, r.StatusCode, r.Header.Get("Content-Type"), want)
		}
		checkHeaders(t, f, r)
	}
}

// A module imports only embedded modules, by relative path.
func TestModulesImportEmbeddedFiles(t *testing.T) {
	files := ui.Files()
	imports := regexp.MustCompile(`(?m)^import .* from "([^"]+)";$`)
	for _, f := range files {
		if !strings.HasSuffix(f, ".js") {
			continue
		}
		for _, m := range imports.FindAllStringSubmatch(body(t, serve(t, http.MethodGet, "/ui/"+f)), -1) {
			if name, ok := strings.CutPrefix(m[1], "./"); !ok || !slices.Contains(files, name) {
				t.Errorf("%s imports %q: not an embedded module", f, m[1])
			}
		}
	}
}

// What names no file is 404, with the same headers; other methods are 405.
func TestUnknown(t *testing.T) {
	for _, p := range []string{"/ui/nope.js", "/ui/static/app.js", "/ui/app.js/", "/elsewhere/app.js", "/ui"} {
		r := serve(t, http.MethodGet, p)
		if r.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, r.StatusCode)
		}
		checkHeaders(t, p, r)
	}
	r := serve(t, http.MethodPost, "/ui/app.js")
	if r.StatusCode != http.StatusMethodNotAllowed || r.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /ui/app.js = %d, Allow %q; want 405 with GET, HEAD", r.StatusCode, r.Header.Get("Allow"))
	}
	if r := serve(t, http.MethodHead, "/ui/app.js"); r.StatusCode != http.StatusOK || body(t, r) != "" {
		t.Errorf("HEAD /ui/app.js = %d, want 200 without a body", r.StatusCode)
	}
}
