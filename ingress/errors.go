package ingress

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/baton-rt/baton/protocol"
)

// Sentinels, one per public error code. Every error the ingress returns to a
// client is an *Error wrapping exactly one of them.
var (
	// ErrBadRequest: the request is malformed or violates a rule (400).
	ErrBadRequest = errors.New("ingress: bad request")
	// ErrUnauthorized: a missing or unknown bearer token (401).
	ErrUnauthorized = errors.New("ingress: unauthorized")
	// ErrForbidden: the admin routes are disabled (no --admin-token-file) (403).
	ErrForbidden = errors.New("ingress: forbidden")
	// ErrNotFound: no such session or route (404).
	ErrNotFound = errors.New("ingress: not found")
	// ErrMethodNotAllowed: the route exists, not for this method (405,
	// with an Allow header).
	ErrMethodNotAllowed = errors.New("ingress: method not allowed")
	// ErrGone: the session ended; its addresses are tombstones (410).
	ErrGone = errors.New("ingress: gone")
	// ErrConflict: an alias asked for by a new session belongs to another;
	// with a finer code, an idempotency key reused for another command or
	// an answer to a request the session does not wait for (409).
	ErrConflict = errors.New("ingress: conflict")
	// ErrTooLarge: the body, or a part of it, exceeds a limit (413).
	ErrTooLarge = errors.New("ingress: too large")
	// ErrUnsupportedCommand: the session's owning deployment reads an inbox
	// wire version that cannot express the command, or one this build
	// cannot produce (422). Nothing was written.
	ErrUnsupportedCommand = errors.New("ingress: unsupported command")
	// ErrUnavailable: no owner of this deployment answered, NATS is down or
	// the topology is missing (503). Nothing was created.
	ErrUnavailable = errors.New("ingress: unavailable")
)

// Public error codes (docs/api.md), the "code" of the error body.
const (
	CodeBadRequest   = "bad_request"
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"
	CodeNotFound     = "not_found"
	CodeGone         = "gone"
	CodeConflict     = "conflict"
	CodeTooLarge     = "too_large"
	CodeUnavailable  = "unavailable"

	// CodeUnsupportedCommand (422): the owning deployment's inbox wire
	// version cannot express the command (docs/api.md, VERSIONING).
	CodeUnsupportedCommand = "unsupported_command"

	CodeMethodNotAllowed = "method_not_allowed"
	// CodeIdempotencyConflict (409): the idempotencyKey was used, within
	// the receipts' lifetime, for a different command on the same session.
	CodeIdempotencyConflict = "idempotency_conflict"
	// CodeUnknownRequest (409): an input or authorization answer whose
	// requestId or attemptId the session does not wait for; the error's
	// "expected" lists the IDs it does wait for.
	CodeUnknownRequest = "unknown_request"
	// CodeRuntimeOnlyCommand (400): a command kind only a session's runtime
	// sends (end, child.result, child.waiting, child.resumed), asked for by
	// a channel.
	CodeRuntimeOnlyCommand = "runtime_only_command"
	// CodeTagsUnsupported (422, ErrUnsupportedCommand): tags sent to a
	// deployment whose owners do not read them — a start with tags, or a
	// PATCH of a session whose owning deployment reads an inbox version
	// before wire.TagsVersion. It names the deployment; nothing was
	// written.
	CodeTagsUnsupported = "tags_unsupported"
	// CodeUnsupportedMode (422, ErrUnsupportedCommand): a busy mode (a
	// delivery's mode, or a session's defaultMode) sent to a deployment
	// whose owners read an inbox version before wire.BusyVersion. It names
	// the deployment and the version it reads; nothing was written.
	CodeUnsupportedMode = "unsupported_mode"
	// CodeInvalidTags (400, ErrBadRequest): tags that break a rule (at
	// most wire.MaxTags, keys [a-z0-9_.-]{1,64}, values at most 256
	// bytes).
	CodeInvalidTags = "invalid_tags"
	// CodeTooManyTags (422, ErrUnsupportedCommand's status): a tag change
	// that would leave the session more than wire.MaxTags tags.
	CodeTooManyTags = "too_many_tags"
)

var codes = []struct {
	err    error
	code   string
	status int
}{
	{ErrBadRequest, CodeBadRequest, http.StatusBadRequest},
	{ErrUnauthorized, CodeUnauthorized, http.StatusUnauthorized},
	{ErrForbidden, CodeForbidden, http.StatusForbidden},
	{ErrNotFound, CodeNotFound, http.StatusNotFound},
	{ErrMethodNotAllowed, CodeMethodNotAllowed, http.StatusMethodNotAllowed},
	{ErrGone, CodeGone, http.StatusGone},
	{ErrConflict, CodeConflict, http.StatusConflict},
	{ErrTooLarge, CodeTooLarge, http.StatusRequestEntityTooLarge},
	{ErrUnsupportedCommand, CodeUnsupportedCommand, http.StatusUnprocessableEntity},
	{ErrUnavailable, CodeUnavailable, http.StatusServiceUnavailable},
}

// Error is a refusal with a stable code. Err is one of the sentinels, so
// errors.Is(err, ingress.ErrGone) works; Message is what the client reads.
// Detail, when set, replaces the sentinel's public code with a finer one of
// the same status (the admin routes answer "session_not_found" where the
// user routes answer "not_found"; see docs/api.md).
type Error struct {
	Err     error
	Message string
	Detail  string
	// Expected lists, for unknown_request, the IDs the session waits for
	// (empty, not absent, when it waits for none).
	Expected []string
}

func (e *Error) Error() string { return e.Err.Error() + ": " + e.Message }

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// Code is the public error code ("bad_request", ...).
func (e *Error) Code() string {
	if e.Detail != "" {
		return e.Detail
	}
	for _, c := range codes {
		if c.err == e.Err {
			return c.code
		}
	}
	return CodeUnavailable
}

// Status is the HTTP status of the code.
func (e *Error) Status() int {
	for _, c := range codes {
		if c.err == e.Err {
			return c.status
		}
	}
	return http.StatusServiceUnavailable
}

// Body is the JSON error body {"error":{"code","message"}}.
func (e *Error) Body() []byte {
	b, _ := json.Marshal(ErrorBody{Error: ErrorDetail{Code: e.Code(), Message: e.Message, Expected: e.Expected}})
	return b
}

// ErrorBody is the JSON shape of every error answer, over HTTP and NATS.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inner object of an error answer.
type ErrorDetail struct {
	Code     string   `json:"code"`
	Message  string   `json:"message"`
	Expected []string `json:"expected,omitzero"` // unknown_request only
}

// fail builds an *Error.
func fail(sentinel error, format string, args ...any) *Error {
	return &Error{Err: sentinel, Message: fmt.Sprintf(format, args...)}
}

// asError turns any error into an *Error: a typed one is kept, anything
// else (a NATS or KV failure) is unavailable — the request may be retried.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return fail(ErrUnavailable, "%v", err)
}

// byCode returns the sentinel for an owner's refusal of a start: a bad
// request or a conflict is the client's to fix; any other code (an
// unavailable owner, a code this build does not know) is unavailable, so the
// client may retry.
func byCode(code protocol.Code) error {
	switch code {
	case protocol.CodeBadRequest:
		return ErrBadRequest
	case protocol.CodeConflict:
		return ErrConflict
	}
	return ErrUnavailable
}

// Codes of the browser support (docs/api.md, "Browsers: CORS and stream
// tokens"). Each is the Detail of an *Error of the sentinel named.
const (
	// CodeCORSOriginRefused (403, ErrForbidden): a CORS preflight from an
	// origin that is not one of Config.CORSOrigins (--cors-origin).
	CodeCORSOriginRefused = "cors_origin_refused"
	// CodeStreamTokensDisabled (404, ErrNotFound): POST
	// /v1/sessions/{id}/stream-token on an ingress without stream token
	// keys (--stream-token-key-file).
	CodeStreamTokensDisabled = "stream_tokens_disabled"
	// CodeTokenExpired (401, ErrUnauthorized): a ?token= on the events
	// route whose expiry has passed; mint a new one.
	CodeTokenExpired = "token_expired"
	// CodeTokenInvalid (401, ErrUnauthorized): a ?token= on the events
	// route that is malformed, tampered with, signed by a key this ingress
	// does not hold, or minted for another session.
	CodeTokenInvalid = "token_invalid"
)
