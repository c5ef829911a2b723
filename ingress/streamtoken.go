package ingress

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Stream tokens (docs/api.md, "Browsers: CORS and stream tokens"): an
// EventSource cannot send a bearer token, so a client mints a short-lived
// token for one session with its bearer token and passes it as ?token= on
// that session's events route, and nowhere else.
//
// A token is v1.<payload>.<mac>: payload is base64url (no padding) of
// "<expiry unix seconds>.<session ID>", mac base64url of
// HMAC-SHA256(key, "v1.<payload>"). The first key signs; every key
// verifies (rotation by restart).
const (
	// DefaultStreamTokenTTL is Config.StreamTokenTTL's default.
	DefaultStreamTokenTTL = 5 * time.Minute
	// MaxStreamTokenTTL is the longest Config.StreamTokenTTL.
	MaxStreamTokenTTL = time.Hour
	// MinStreamTokenKeyBytes is the shortest stream token key.
	MinStreamTokenKeyBytes = 32
	// MaxStreamTokenKeys is how many keys Config.StreamTokenKeys may hold:
	// the signing key and the previous one.
	MaxStreamTokenKeys = 2

	streamTokenVersion = "v1"
	streamTokenParam   = "token" // the query parameter of the events route
	maxStreamTokenLen  = 512     // longer is invalid without decoding
)

// b64 is the tokens' encoding; strict, so that one token has one spelling
// (a changed character never decodes to the same bytes).
var b64 = base64.RawURLEncoding.Strict()

// StreamToken is the answer of POST /v1/sessions/{id}/stream-token.
type StreamToken struct {
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expiresAt"` // UTC, whole seconds
}

// LoadStreamTokenKeys reads a stream token key file: one key per line (its
// bytes as written, spaces around it trimmed); blank lines and lines
// starting with '#' are ignored. It wants one or two keys (the first
// signs), each at least MinStreamTokenKeyBytes long.
func LoadStreamTokenKeys(path string) ([][]byte, error) {
	lines, err := readSecrets(path, "stream token key file", "key")
	if err != nil {
		return nil, err
	}
	keys := make([][]byte, len(lines))
	for i, l := range lines {
		keys[i] = []byte(l)
	}
	if err := checkStreamTokenKeys(keys); err != nil {
		return nil, fmt.Errorf("%w (file %s)", err, path)
	}
	return keys, nil
}

// checkStreamTokenKeys checks Config.StreamTokenKeys: none (stream tokens
// disabled), or one or two of at least MinStreamTokenKeyBytes.
func checkStreamTokenKeys(keys [][]byte) error {
	if len(keys) > MaxStreamTokenKeys {
		return fmt.Errorf("ingress: %d stream token keys: want 1 or %d (the signing key, then the previous one)", len(keys), MaxStreamTokenKeys)
	}
	for i, k := range keys {
		if len(k) < MinStreamTokenKeyBytes {
			return fmt.Errorf("ingress: stream token key %d is %d bytes: want at least %d (e.g. openssl rand -hex 32)", i+1, len(k), MinStreamTokenKeyBytes)
		}
	}
	return nil
}

// checkStreamTokens checks the stream token configuration of New.
func checkStreamTokens(keys [][]byte, ttl time.Duration) error {
	if ttl > MaxStreamTokenTTL {
		return fmt.Errorf("ingress: stream token TTL %s: want at most %s", ttl, MaxStreamTokenTTL)
	}
	return checkStreamTokenKeys(keys)
}

// httpStreamToken is POST /v1/sessions/{id}/stream-token (empty body or
// {}): a token for the session's events route, 200 StreamToken. The
// session must be one the events route serves.
func (s *Server) httpStreamToken(w http.ResponseWriter, r *http.Request) error {
	if len(s.cfg.StreamTokenKeys) == 0 {
		return &Error{Err: ErrNotFound, Detail: CodeStreamTokensDisabled,
			Message: "stream tokens are disabled: start the ingress with --stream-token-key-file"}
	}
	id := r.PathValue("id")
	if err := checkSessionID(id); err != nil {
		return err
	}
	b, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) > 0 {
		if err := strictObject(b, nil); err != nil {
			return bad("%v (the body is empty or {})", err)
		}
	}
	a, err := s.topology(r.Context())
	if err != nil {
		return err
	}
	if _, err := a.liveRecord(r.Context(), id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, mintStreamToken(s.cfg.StreamTokenKeys[0], id, s.cfg.Now().Add(s.cfg.StreamTokenTTL)))
}

// mintStreamToken signs a token for session id that expires at exp
// (truncated to the second).
func mintStreamToken(key []byte, id string, exp time.Time) StreamToken {
	payload := b64.EncodeToString([]byte(strconv.FormatInt(exp.Unix(), 10) + "." + id))
	signed := streamTokenVersion + "." + payload
	return StreamToken{
		Token:     signed + "." + b64.EncodeToString(streamTokenMAC(key, signed)),
		ExpiresAt: time.Unix(exp.Unix(), 0).UTC(),
	}
}

func streamTokenMAC(key []byte, signed string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// verifyStreamToken checks tok for the events of session id at now:
// token_invalid unless one of keys signed it for id, token_expired once
// its expiry has passed. Messages never quote the token.
func verifyStreamToken(keys [][]byte, tok, id string, now time.Time) error {
	if len(keys) == 0 {
		return tokenInvalid("stream tokens are disabled on this ingress")
	}
	payload, ok := verifyMAC(keys, tok)
	if !ok {
		return tokenInvalid("the stream token is malformed or its signature does not verify")
	}
	expText, sid, ok := strings.Cut(string(payload), ".")
	exp, err := strconv.ParseInt(expText, 10, 64)
	switch {
	case !ok || err != nil:
		return tokenInvalid("the stream token is malformed")
	case sid != id:
		return tokenInvalid("the stream token is for another session")
	case now.Unix() >= exp:
		return &Error{Err: ErrUnauthorized, Detail: CodeTokenExpired, Message: fmt.Sprintf(
			"the stream token expired at %s; mint a new one (POST /v1/sessions/%s/stream-token)", time.Unix(exp, 0).UTC().Format(time.RFC3339), id)}
	}
	return nil
}

// verifyMAC returns the payload of tok if one of keys signed it. Every key
// is tried, each comparison in constant time.
func verifyMAC(keys [][]byte, tok string) ([]byte, bool) {
	if len(tok) > maxStreamTokenLen {
		return nil, false
	}
	ver, rest, ok1 := strings.Cut(tok, ".")
	payload, mac64, ok2 := strings.Cut(rest, ".")
	mac, err := b64.DecodeString(mac64)
	if !ok1 || !ok2 || ver != streamTokenVersion || err != nil {
		return nil, false
	}
	found := false
	for _, k := range keys {
		found = hmac.Equal(mac, streamTokenMAC(k, ver+"."+payload)) || found
	}
	if !found {
		return nil, false
	}
	b, err := b64.DecodeString(payload)
	return b, err == nil
}

func tokenInvalid(msg string) *Error {
	return &Error{Err: ErrUnauthorized, Detail: CodeTokenInvalid, Message: msg}
}

// streamUser is user for the events route: a valid bearer token passes as
// everywhere; without one, a ?token= stream token minted for the path's
// session does. A request with neither is refused as user refuses it.
func (s *Server) streamUser(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		q := r.URL.Query()
		if err := s.auth.check(r); err == nil || !q.Has(streamTokenParam) {
			return s.user(h)(w, r)
		}
		if err := verifyStreamToken(s.cfg.StreamTokenKeys, q.Get(streamTokenParam), r.PathValue("id"), s.cfg.Now()); err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="baton", error="invalid_token"`)
			return err
		}
		return h(w, r)
	}
}
