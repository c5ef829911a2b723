package ingress

import (
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// redacted replaces the value of a token query parameter in the log.
const redacted = "REDACTED"

// accessLog logs every HTTP request at DEBUG once it is answered ("http
// request": method, path, query, status, duration). The query is logged
// with every token value replaced by REDACTED: a stream token is never
// logged. With DEBUG off it returns next unchanged.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.log.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() { // also when a handler aborts with a panic
			s.log.Debug("http request", "method", r.Method, "path", r.URL.Path, "query", redactQuery(r.URL.RawQuery),
				"status", sw.status(), "duration", time.Since(start))
		}()
		next.ServeHTTP(sw, r)
	})
}

// redactQuery is the raw query with the value of every token parameter
// replaced by REDACTED. Both '&' and ';' count as separators, and a name
// that does not unescape, or is "token" in any case, is redacted too: what
// might be a token is never logged, even where the API would not read it.
func redactQuery(raw string) string {
	var b strings.Builder
	for raw != "" {
		part, sep := raw, ""
		if i := strings.IndexAny(raw, "&;"); i >= 0 {
			part, sep, raw = raw[:i], raw[i:i+1], raw[i+1:]
		} else {
			raw = ""
		}
		b.WriteString(redactPair(part))
		b.WriteString(sep)
	}
	return b.String()
}

// redactPair is one name=value of a query, its value redacted if the name
// may be the token parameter's.
func redactPair(pair string) string {
	name, _, ok := strings.Cut(pair, "=")
	if !ok {
		return pair
	}
	if n, err := url.QueryUnescape(name); err == nil && !strings.EqualFold(n, streamTokenParam) {
		return pair
	}
	return name + "=" + redacted
}
