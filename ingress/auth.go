package ingress

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// LoadTokens reads a token file: one bearer token per line; blank lines and
// lines starting with '#' are ignored. A file without a token is an error.
func LoadTokens(path string) ([]string, error) {
	return readSecrets(path, "token file", "token")
}

// readSecrets reads a file of secrets, one per line, spaces around it
// trimmed; blank lines and lines starting with '#' are ignored. A secret
// with whitespace inside, or a file without one, is an error; file and
// item name them in the messages ("token file", "token").
func readSecrets(path, file, item string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("ingress: %s: %w", file, err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsAny(line, " \t") {
			return nil, fmt.Errorf("ingress: %s %s: a %s contains whitespace", file, path, item)
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ingress: %s %s: %w", file, path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ingress: %s %s holds no %s", file, path, item)
	}
	return out, nil
}

// auth checks bearer tokens. Tokens are kept as SHA-256 digests and
// compared in constant time, so neither a token's content nor its length
// leaks through timing.
type auth struct {
	user, admin [][32]byte
	open        bool // --insecure-dev without tokens: /v1/ needs none
}

func newAuth(user, admin []string, insecure bool) *auth {
	return &auth{user: digests(user), admin: digests(admin), open: insecure && len(user) == 0}
}

func digests(toks []string) [][32]byte {
	out := make([][32]byte, len(toks))
	for i, t := range toks {
		out[i] = sha256.Sum256([]byte(t))
	}
	return out
}

// check verifies the request's bearer token against the user tokens.
func (a *auth) check(r *http.Request) error {
	if a.open {
		return nil
	}
	return match(r, a.user)
}

// checkAdmin verifies an admin token; without admin tokens nothing passes.
func (a *auth) checkAdmin(r *http.Request) error { return match(r, a.admin) }

func match(r *http.Request, set [][32]byte) error {
	tok, ok := bearer(r.Header.Get("Authorization"))
	if !ok {
		return fail(ErrUnauthorized, "missing bearer token (Authorization: Bearer <token>)")
	}
	d := sha256.Sum256([]byte(tok))
	found := 0
	for i := range set {
		found |= subtle.ConstantTimeCompare(d[:], set[i][:])
	}
	if found != 1 {
		return fail(ErrUnauthorized, "unknown bearer token")
	}
	return nil
}

// bearer is the token of an Authorization header with the Bearer scheme.
// The scheme is case-insensitive (RFC 9110 §11.1: "bearer", "BEARER"),
// the token is not; spaces around it are not part of it.
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	tok = strings.TrimSpace(tok)
	return tok, ok && strings.EqualFold(scheme, "Bearer") && tok != ""
}
