package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/baton-rt/baton/docs"
	"github.com/baton-rt/baton/ingress/ui"
	"github.com/baton-rt/baton/wire"
)

// Handler returns the HTTP API of docs/api.md (see docs/api.md): every
// /v1/ route, /healthz and /readyz, and with Config.UI the inspector at
// /ui/ (uiRoutes). /metrics is the process's: it serves
// the registry given as Config.Registerer (cmd/ingress does). With
// Config.CORSOrigins it answers CORS preflights (cors.go); every request
// is logged at DEBUG (accesslog.go).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.route(mux, "POST /v1/sessions", s.user(s.httpCreate))
	s.route(mux, "POST /v1/deliveries", s.user(s.httpDeliver))
	for _, k := range []wire.Kind{wire.KindCancel, wire.KindReset, wire.KindClear, wire.KindCompact} {
		s.route(mux, "POST /v1/sessions/{id}/"+string(k), s.user(s.httpControl(k)))
	}
	s.route(mux, "POST /v1/sessions/{id}/end", s.user(s.httpUserEnd))
	for _, k := range RuntimeOnlyKinds { // any method: 400, never 404 or 405
		s.route(mux, "/v1/sessions/{id}/"+string(k), s.user(refuseKind(k)))
	}
	s.route(mux, "POST /v1/sessions/{id}/input", s.user(s.httpInput))
	s.route(mux, "POST /v1/sessions/{id}/authorize", s.user(s.httpAuthorize))
	s.route(mux, "GET /v1/sessions/{id}", s.user(s.httpStatus))
	s.route(mux, "PATCH /v1/sessions/{id}", s.user(s.httpTag))
	s.route(mux, "DELETE /v1/sessions/{id}", s.user(s.httpDelete))
	s.route(mux, "GET /v1/sessions/{id}/events", s.streamUser(s.events))
	s.route(mux, "POST /v1/sessions/{id}/stream-token", s.user(s.httpStreamToken))
	s.route(mux, "GET /v1/sessions/{id}/commands/{seq}", s.user(s.httpCommand))
	s.adminRoutes(mux)
	s.route(mux, "GET /v1/ingress", s.httpInfo)
	s.route(mux, "GET /v1/openapi.json", httpOpenAPI)
	s.route(mux, "GET /healthz", func(w http.ResponseWriter, _ *http.Request) error {
		_, err := w.Write([]byte("ok\n"))
		return err
	})
	s.route(mux, "GET /readyz", func(w http.ResponseWriter, r *http.Request) error {
		if err := s.Ready(r.Context()); err != nil {
			return fail(ErrUnavailable, "%v", asError(err).Message)
		}
		_, err := w.Write([]byte("ok\n"))
		return err
	})
	s.uiRoutes(mux)
	s.route(mux, "/", noRoute(mux, "route"))
	return s.accessLog(s.withCORS(mux))
}

// uiRoutes serves the session inspector under /ui/ with Config.UI: its
// files need no token (the app sends the tokens its user enters).
func (s *Server) uiRoutes(mux *http.ServeMux) {
	if !s.cfg.UI {
		return
	}
	files := ui.Handler()
	s.route(mux, "GET "+ui.Prefix, func(w http.ResponseWriter, r *http.Request) error {
		files.ServeHTTP(w, r)
		return nil
	})
	s.route(mux, "GET /ui", func(w http.ResponseWriter, r *http.Request) error {
		http.Redirect(w, r, ui.Prefix, http.StatusMovedPermanently)
		return nil
	})
}

// noRoute answers a request no route took: 405 with an Allow header when
// the path has routes for other methods, else 404. (The catch-all patterns
// match every method, so ServeMux's own 405 never happens.)
func noRoute(mux *http.ServeMux, what string) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if allow := allowed(mux, r); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			return fail(ErrMethodNotAllowed, "%s is not allowed on %s (allowed: %s)", r.Method, clip(r.URL.Path), strings.Join(allow, ", "))
		}
		return fail(ErrNotFound, "no %s %s %s", what, r.Method, clip(r.URL.Path))
	}
}

// allowed lists the methods that a route other than a catch-all accepts
// for r's path.
func allowed(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.WithContext(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); strings.HasPrefix(pattern, m+" ") || m == http.MethodHead && strings.HasPrefix(pattern, "GET ") {
			out = append(out, m)
		}
	}
	return out
}

// handlerFunc is an HTTP handler that returns its refusal.
type handlerFunc func(http.ResponseWriter, *http.Request) error

// route registers h under pattern, counting requests by route and status.
// A refusal is written as {"error":{"code","message"}}.
func (s *Server) route(mux *http.ServeMux, pattern string, h handlerFunc) {
	s.routesMu.Lock()
	if !slices.Contains(s.routes, pattern) {
		s.routes = append(s.routes, pattern)
	}
	s.routesMu.Unlock()
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		defer s.busy.begin(Pending{Via: "http", Op: pattern, Path: r.URL.Path, SessionID: r.PathValue("id"), Since: s.cfg.Now()})()
		sw := &statusWriter{ResponseWriter: w}
		if err := h(sw, r); err != nil {
			writeError(sw, asError(err))
		}
		s.met.requests.WithLabelValues("http", pattern, strconv.Itoa(sw.status())).Inc()
	})
}

// user requires a user bearer token (unless the ingress runs open with
// --insecure-dev and no token file).
func (s *Server) user(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.auth.check(r); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="baton"`)
			return err
		}
		return h(w, r)
	}
}

// admin requires an admin bearer token; --insecure-dev does not open it.
// Without admin tokens (no --admin-token-file) the admin routes are
// disabled: 403 admin_disabled, whatever the request.
func (s *Server) admin(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if len(s.auth.admin) == 0 {
			return &Error{Err: ErrForbidden, Detail: CodeAdminDisabled,
				Message: "the admin routes are disabled: start the ingress with --admin-token-file"}
		}
		if err := s.auth.checkAdmin(r); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="baton-admin"`)
			return err
		}
		return h(w, r)
	}
}

func (s *Server) httpCreate(w http.ResponseWriter, r *http.Request) error {
	b, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	req, err := ParseCreate(b, s.cfg.Limits)
	if err != nil {
		return err
	}
	out, err := s.Create(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, out)
}

func (s *Server) httpDeliver(w http.ResponseWriter, r *http.Request) error {
	b, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	req, err := ParseDelivery(b, s.cfg.Limits)
	if err != nil {
		return err
	}
	return s.accepted(w, r, req, s.Deliver)
}

func (s *Server) httpControl(kind wire.Kind) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		return s.sessionOp(w, r, func(b []byte, id string) (Request, error) {
			return ParseControl(b, kind, id, s.cfg.Limits)
		})
	}
}

// refuseKind answers a route of a runtime-internal kind: 400
// runtime_only_command.
func refuseKind(kind wire.Kind) handlerFunc {
	return func(http.ResponseWriter, *http.Request) error { return runtimeOnly(kind) }
}

func (s *Server) httpInput(w http.ResponseWriter, r *http.Request) error {
	return s.sessionOp(w, r, func(b []byte, id string) (Request, error) { return ParseInput(b, id, s.cfg.Limits) })
}

// httpTag is PATCH /v1/sessions/{id}: a tag command (or a configure
// command, for a defaultMode), 202 like every command (applied at the
// owner's next boundary: session.tagged).
func (s *Server) httpTag(w http.ResponseWriter, r *http.Request) error {
	return s.sessionOp(w, r, func(b []byte, id string) (Request, error) { return ParseTag(b, id, s.cfg.Limits) })
}

func (s *Server) httpAuthorize(w http.ResponseWriter, r *http.Request) error {
	return s.sessionOp(w, r, func(b []byte, id string) (Request, error) { return ParseAuthorize(b, id, s.cfg.Limits) })
}

// sessionOp runs a command on the session named by the path.
func (s *Server) sessionOp(w http.ResponseWriter, r *http.Request, parse func([]byte, string) (Request, error)) error {
	return s.sessionOpVia(w, r, parse, s.Send)
}

// sessionOpVia is sessionOp carried out by op.
func (s *Server) sessionOpVia(w http.ResponseWriter, r *http.Request, parse func([]byte, string) (Request, error),
	op func(context.Context, Request) (Receipt, error)) error {
	id := r.PathValue("id")
	if err := checkSessionID(id); err != nil {
		return err
	}
	b, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	req, err := parse(b, id)
	if err != nil {
		return err
	}
	return s.accepted(w, r, req, op)
}

func (s *Server) accepted(w http.ResponseWriter, r *http.Request, req Request, op func(context.Context, Request) (Receipt, error)) error {
	rc, err := op(r.Context(), req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, rc)
}

func (s *Server) httpStatus(w http.ResponseWriter, r *http.Request) error {
	st, err := s.Status(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, st)
}

// readBody reads at most the body limit (plus one byte, to tell "too
// large").
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.Limits.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, fail(ErrTooLarge, "the body exceeds %d bytes", s.cfg.Limits.MaxBodyBytes)
	case err != nil:
		return nil, bad("read body: %v", err)
	}
	return b, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(append(b, '\n'))
	return err
}

func writeError(w http.ResponseWriter, e *Error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status())
	_, _ = w.Write(append(e.Body(), '\n'))
}

// statusWriter records the status for the request metric. Unwrap lets
// http.ResponseController reach Flush and SetWriteDeadline underneath.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// Routes lists the patterns of the routes Handler serves (as
// http.ServeMux reads them: "METHOD /path/{param}", or a path alone for a
// route that takes every method), in the order registered; empty before
// the first Handler call. The API description (docs/openapi.yaml) holds
// every /v1/ route of this list.
func (s *Server) Routes() []string {
	s.routesMu.Lock()
	defer s.routesMu.Unlock()
	return slices.Clone(s.routes)
}

// httpOpenAPI serves the API description, docs/openapi.yaml as JSON,
// without a token.
func httpOpenAPI(w http.ResponseWriter, _ *http.Request) error {
	b, err := docs.JSON()
	if err != nil {
		return fail(ErrUnavailable, "the API description: %v", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, err = w.Write(b)
	return err
}
