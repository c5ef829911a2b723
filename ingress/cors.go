package ingress

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// CORS (docs/api.md, "Browsers: CORS and stream tokens"). The API
// authenticates with bearer tokens, never cookies, so the answers never
// carry Access-Control-Allow-Credentials, and Access-Control-Allow-Origin
// always names the request's own origin, never "*".
const (
	// corsAllowHeaders are the request headers a browser may send.
	corsAllowHeaders = "Authorization, Content-Type, Last-Event-ID"
	// corsExposeHeaders are the answer headers a script may read.
	corsExposeHeaders = "WWW-Authenticate, Allow"
	// corsMaxAge is how long (seconds) a browser may cache a preflight.
	corsMaxAge = "600"
	// preflightRoute is the route label of a preflight answered by the
	// CORS layer in baton_ingress_requests_total.
	preflightRoute = "OPTIONS (CORS preflight)"
)

// CheckCORSOrigin checks one allowed origin as a browser sends it in its
// Origin header: scheme://host[:port], lower case, no default port, no
// path, query or user, no wildcard.
func CheckCORSOrigin(origin string) error {
	if strings.Contains(origin, "*") {
		return fmt.Errorf("ingress: CORS origin %q: wildcards are not allowed; list each origin", origin)
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("ingress: CORS origin %q: want scheme://host[:port], e.g. https://app.example.com", origin)
	}
	if u.User != nil || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(origin, "#") {
		return fmt.Errorf("ingress: CORS origin %q: want scheme://host[:port] only: no path (not even /), query, fragment or user", origin)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("ingress: CORS origin %q: port %q is not 1-65535", origin, p)
		}
	}
	if want := canonicalOrigin(u); origin != want {
		return fmt.Errorf("ingress: CORS origin %q: write it as a browser sends it: %q", origin, want)
	}
	return nil
}

// canonicalOrigin is u's origin as a browser serializes it: lower-case
// scheme and host, the port only when it is not the scheme's default.
func canonicalOrigin(u *url.URL) string {
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if strings.Contains(host, ":") { // IPv6
		host = "[" + host + "]"
	}
	if port == "" || scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		return scheme + "://" + host
	}
	return scheme + "://" + host + ":" + port
}

// checkCORSOrigins checks Config.CORSOrigins.
func checkCORSOrigins(origins []string) error {
	for _, o := range origins {
		if err := CheckCORSOrigin(o); err != nil {
			return err
		}
	}
	return nil
}

// cors answers preflights and adds the CORS headers for the allowed
// origins around the API's mux.
type cors struct {
	s       *Server
	mux     *http.ServeMux
	origins map[string]bool
}

// withCORS wraps mux in the CORS layer; without Config.CORSOrigins it
// returns mux itself: no preflight is answered and no CORS header sent.
func (s *Server) withCORS(mux *http.ServeMux) http.Handler {
	if len(s.cfg.CORSOrigins) == 0 {
		return mux
	}
	c := &cors{s: s, mux: mux, origins: make(map[string]bool, len(s.cfg.CORSOrigins))}
	for _, o := range s.cfg.CORSOrigins {
		c.origins[o] = true
	}
	return c
}

// ServeHTTP answers a preflight itself and passes every other request to
// the mux, with the CORS headers when its origin is allowed. Every answer
// varies by Origin, for caches.
func (c *cors) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	ok := origin != "" && c.origins[origin]
	if r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != "" {
		c.preflight(w, r, origin, ok)
		return
	}
	c.serve(w, r, origin, ok)
}

// serve passes r to the mux, with the CORS headers of an allowed origin.
func (c *cors) serve(w http.ResponseWriter, r *http.Request, origin string, ok bool) {
	if ok {
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Set("Access-Control-Expose-Headers", corsExposeHeaders)
	}
	c.mux.ServeHTTP(w, r)
}

// preflight answers an OPTIONS preflight: 403 cors_origin_refused for an
// origin not allowed; for an allowed one, 204 with the methods the path's
// routes take, or the mux's own answer (404, with the CORS headers) on a
// path without routes. No bearer token is needed.
func (c *cors) preflight(w http.ResponseWriter, r *http.Request, origin string, ok bool) {
	if !ok {
		writeError(w, &Error{Err: ErrForbidden, Detail: CodeCORSOriginRefused,
			Message: fmt.Sprintf("origin %q is not allowed (start the ingress with --cors-origin %s to allow it)", clip(origin), clip(origin))})
		c.count(http.StatusForbidden)
		return
	}
	methods := allowed(c.mux, r)
	if len(methods) == 0 {
		c.serve(w, r, origin, true)
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Methods", strings.Join(methods, ", "))
	h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
	c.count(http.StatusNoContent)
}

// count counts a preflight the CORS layer answered itself.
func (c *cors) count(status int) {
	c.s.met.requests.WithLabelValues("http", preflightRoute, strconv.Itoa(status)).Inc()
}
