package ingress_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/baton-rt/baton/docs"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// The API description (docs/openapi.yaml) is held to the server both
// ways: every /v1/ route the handler serves is described and every
// described operation is served (TestOpenAPICoverage), and every request
// and answer of the ingress's route tests is validated against it with
// kin-openapi (conformant: newEnv wraps every test's handler with it).

// apiDoc is the document, loaded and validated once, with a router that
// matches paths on any host.
var apiDoc = sync.OnceValues(func() (*apiDescription, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(docs.OpenAPI())
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("docs/openapi.yaml does not validate: %w", err)
	}
	doc.Servers = nil // match the path on any host
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &apiDescription{doc: doc, router: router}, nil
})

type apiDescription struct {
	doc    *openapi3.T
	router routers.Router
}

func loadAPI(t *testing.T) *apiDescription {
	t.Helper()
	d, err := apiDoc()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// maxCaptured bounds the answer bytes a validation keeps.
const maxCaptured = 16 << 20

// conformant wraps an ingress handler: each request to a described
// operation that succeeds (2xx) is validated against the operation, and
// every answer to a described operation — its status among the
// described ones, its headers and body — against its response. Requests
// to undescribed paths or methods are the 404 and 405 tests' and pass
// unchecked. The mismatches fail the test when it ends.
func conformant(t *testing.T) func(http.Handler) http.Handler {
	api := loadAPI(t)
	var mu sync.Mutex
	var failures []string
	t.Cleanup(func() { // registered first: runs after the ingress closed
		mu.Lock()
		defer mu.Unlock()
		for _, f := range failures {
			t.Errorf("the server and docs/openapi.yaml disagree: %s", f)
		}
	})
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			route, params, err := api.router.FindRoute(r)
			if err != nil || r.Method == http.MethodHead {
				next.ServeHTTP(w, r)
				return
			}
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			rec := &capture{ResponseWriter: w}
			next.ServeHTTP(rec, r)
			if msg := validateExchange(r, body, route, params, rec); msg != "" {
				fail("%s %s → %d: %s", r.Method, r.URL.RequestURI(), rec.status(), msg)
			}
		})
	}
}

// validateExchange validates one exchange; "" when it conforms.
func validateExchange(r *http.Request, body []byte, route *routers.Route, params map[string]string, rec *capture) string {
	ctx := context.Background()
	req := r.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(body))
	sse := strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream")
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
			IncludeResponseStatus: true, ExcludeResponseBody: sse || rec.truncated, MultiError: true}}
	if st := rec.status(); st >= 200 && st < 300 {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			return "request: " + err.Error()
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.status(), Header: rec.Header(),
		Body: io.NopCloser(bytes.NewReader(rec.body.Bytes())), Options: in.Options}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return "response: " + err.Error() + " — body: " + clipBody(rec.body.Bytes())
	}
	return ""
}

func clipBody(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// capture passes an answer through and keeps its status and (up to
// maxCaptured) body. Unwrap lets http.ResponseController reach Flush and
// the deadlines underneath (SSE).
type capture struct {
	http.ResponseWriter
	code      int
	body      bytes.Buffer
	truncated bool
}

func (c *capture) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *capture) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.code = http.StatusOK
	}
	if c.body.Len()+len(b) <= maxCaptured {
		c.body.Write(b)
	} else {
		c.truncated = true
	}
	return c.ResponseWriter.Write(b)
}

func (c *capture) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *capture) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *capture) status() int {
	if c.code == 0 {
		return http.StatusOK
	}
	return c.code
}

// exemptRoutes are the routes the description leaves out by its written
// rule (info.description): the non-API paths, and the catch-alls that
// answer 404 or 405 for what no route takes.
var exemptRoutes = map[string]bool{"GET /healthz": true, "GET /readyz": true, "/": true, "/v1/admin/": true, "GET /ui/": true, "GET /ui": true}

// Every route the handler serves under /v1/ is described, and every
// described operation is served: a route without a method (every method
// answers the same) is described as its POST.
func TestOpenAPICoverage(t *testing.T) {
	t.Parallel()
	api := loadAPI(t)
	e := newEnv(t)
	served := map[string]bool{}
	for _, pattern := range e.ing.Routes() {
		if exemptRoutes[pattern] {
			continue
		}
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			method, path = http.MethodPost, pattern
		}
		if !strings.HasPrefix(path, "/v1/") {
			t.Errorf("route %q is neither under /v1/ nor exempt", pattern)
			continue
		}
		served[method+" "+path] = true
		item := api.doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("the server serves %s %s; docs/openapi.yaml does not describe it", method, path)
		}
	}
	for path, item := range api.doc.Paths.Map() {
		for method := range item.Operations() {
			if !served[method+" "+path] {
				t.Errorf("docs/openapi.yaml describes %s %s; the server does not serve it", method, path)
			}
		}
	}
	if len(served) < 30 {
		t.Fatalf("only %d routes served: Routes() is not the handler's list", len(served))
	}
}

// GET /v1/openapi.json serves the document without a token: JSON that
// loads and validates as the same description.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	resp, err := http.Get(e.ing.URL() + "/v1/openapi.json") // no Authorization
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatalf("the served document does not validate: %v", err)
	}
	want := loadAPI(t).doc
	if doc.OpenAPI != want.OpenAPI || doc.Paths.Len() != want.Paths.Len() || len(doc.Components.Schemas) != len(want.Components.Schemas) {
		t.Fatalf("served %s with %d paths and %d schemas; the document has %s, %d and %d", doc.OpenAPI, doc.Paths.Len(),
			len(doc.Components.Schemas), want.OpenAPI, want.Paths.Len(), len(want.Components.Schemas))
	}
}
