package ingress

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// Defaults of Limits.
const (
	// DefaultMaxBodyBytes keeps a request body, once wrapped in the command
	// envelope, below wire.MaxCommandBytes and so below the NATS default
	// max_payload (1 MiB): 896 KiB of body, 64 KiB for envelope and headers.
	// A body whose encoding still grows past the limit (JSON escapes) is a
	// 413 as well: wire.Encode refuses it with wire.ErrTooLarge.
	DefaultMaxBodyBytes = wire.MaxCommandBytes - 64<<10
	// DefaultMaxPayloads bounds the payloads of one delivery.
	DefaultMaxPayloads = 64
	// MaxKeyBytes bounds idempotencyKey and caller (the wire limit).
	MaxKeyBytes = 256
)

// Limits bound a request before anything is looked up or written.
type Limits struct {
	MaxBodyBytes int64
	MaxPayloads  int
}

func (l Limits) withDefaults() Limits {
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if l.MaxPayloads <= 0 {
		l.MaxPayloads = DefaultMaxPayloads
	}
	return l
}

// Request is a parsed and checked request: its target and the command it
// carries. Parsing does no I/O; a Request that parses can still be refused
// later (unknown session, ended session, no owner).
type Request struct {
	SessionID  string    // the target by session ID, or
	Alias      string    // the target by alias (raw address)
	Kind       wire.Kind // the command; "" for a create without a first message
	Mode       string    // deliver: one of wire.Modes(); "" for the session's default
	DebounceMs int64     // deliver with mode debounce: its window
	// Configure is the session's default mode: a configure command (PATCH
	// /v1/sessions/{id}), or, on a create, sent before the first message.
	Configure      *wire.Configure
	Payloads       []wire.Payload
	Input          *wire.InputResponse
	Auth           *wire.AuthCallback
	Move           *wire.Move // admin move
	Caller         string
	IdempotencyKey string
	Timeout        string // session lifetime when the request creates the session
	// Tags are the new session's tags when the request creates one
	// (ignored on a delivery to an existing session).
	Tags map[string]string
	// Tag is a tag command's merge (PATCH /v1/sessions/{id}).
	Tag *wire.Tag
	// EndMessage is a user's end's optional message (terminate).
	EndMessage string
}

// body is the union of every request member. Pointers tell an absent
// member from an empty one.
type body struct {
	SessionID       *string           `json:"sessionId"`
	Alias           *string           `json:"alias"`
	Text            *string           `json:"text"`
	Payloads        []json.RawMessage `json:"payloads"`
	Mode            *string           `json:"mode"`
	Caller          *string           `json:"caller"`
	IdempotencyKey  *string           `json:"idempotencyKey"`
	Timeout         *string           `json:"timeout"`
	RequestID       *string           `json:"requestId"`
	Value           json.RawMessage   `json:"value"`
	AttemptID       *string           `json:"attemptId"`
	Result          *string           `json:"result"`
	Data            json.RawMessage   `json:"data"`
	Tags            json.RawMessage   `json:"tags"`
	Message         *string           `json:"message"`
	Debounce        *string           `json:"debounce"`
	DefaultMode     *string           `json:"defaultMode"`
	DefaultDebounce *string           `json:"defaultDebounce"`
}

// Member sets of each request body.
var (
	createKeys    = []string{"alias", "text", "payloads", "timeout", "caller", "tags", "defaultMode", "defaultDebounce"}
	deliverKeys   = []string{"sessionId", "alias", "text", "payloads", "mode", "debounce", "caller", "idempotencyKey", "timeout", "tags"}
	tagKeys       = []string{"tags", "defaultMode", "defaultDebounce", "caller", "idempotencyKey"}
	controlKeys   = []string{"caller", "idempotencyKey"}
	inputKeys     = []string{"requestId", "value", "caller", "idempotencyKey"}
	authorizeKeys = []string{"attemptId", "result", "data", "caller", "idempotencyKey"}
	payloadKeys   = []string{"message", "context", "inputResponses", "outputSchema", "ext"}
)

func bad(format string, args ...any) *Error { return fail(ErrBadRequest, format, args...) }

// RuntimeOnlyKinds are the command kinds a session's runtime sends another
// session (a child its parent); a channel cannot. The kind end (a parent
// closing its child's handle) is runtime-only too, but its route name is
// the user's end (POST /v1/sessions/{id}/end: a terminate command), so it
// is not listed: no request ever produces it.
var RuntimeOnlyKinds = []wire.Kind{wire.KindChildResult, wire.KindChildWaiting, wire.KindChildResumed}

// runtimeOnly refuses a runtime-internal command kind from a channel.
func runtimeOnly(kind wire.Kind) *Error {
	return &Error{Err: ErrBadRequest, Detail: CodeRuntimeOnlyCommand, Message: fmt.Sprintf(
		"%q is a runtime-internal command (a parent session's runtime and its children exchange it); channels cannot send it", kind)}
}

// runtimeFields are the envelope members only a session's runtime sets (on
// a parent's command to its child): a body carrying one is refused by name.
var runtimeFields = []string{"parentSessionId", "handle", "depth"}

// parseBody checks the size and shape of b and decodes it.
func parseBody(b []byte, lim Limits, allowed []string) (body, *Error) {
	var v body
	if int64(len(b)) > lim.MaxBodyBytes {
		return v, fail(ErrTooLarge, "the body is %d bytes, the limit is %d", len(b), lim.MaxBodyBytes)
	}
	if err := decodeStrict(b, &v, allowed); err != nil {
		return v, bad("%v", err)
	}
	return v, nil
}

// ParseCreate parses POST /v1/sessions (NATS: baton.ingress.create):
// optional alias, first message (text or payloads), timeout and caller.
func ParseCreate(b []byte, lim Limits) (Request, error) {
	lim = lim.withDefaults()
	if len(b) == 0 {
		return Request{}, nil
	}
	v, e := parseBody(b, lim, createKeys)
	if e != nil {
		return Request{}, e
	}
	r := Request{}
	if v.Alias != nil {
		if err := checkAlias(*v.Alias); err != nil {
			return Request{}, err
		}
		r.Alias = *v.Alias
	}
	if v.Text != nil || v.Payloads != nil {
		if err := r.message(v, lim); err != nil {
			return Request{}, err
		}
	}
	c, err := parseConfigure(v.DefaultMode, v.DefaultDebounce)
	if err != nil {
		return Request{}, err
	}
	r.Configure = c
	return r, r.common(v)
}

// ParseDelivery parses POST /v1/deliveries (NATS: baton.ingress.deliver):
// exactly one of sessionId and alias, exactly one of text and payloads.
func ParseDelivery(b []byte, lim Limits) (Request, error) {
	lim = lim.withDefaults()
	v, e := parseBody(b, lim, deliverKeys)
	if e != nil {
		return Request{}, e
	}
	var r Request
	switch {
	case v.SessionID != nil && v.Alias != nil:
		return Request{}, bad("give exactly one of sessionId and alias, not both")
	case v.SessionID != nil:
		if err := checkSessionID(*v.SessionID); err != nil {
			return Request{}, err
		}
		r.SessionID = *v.SessionID
	case v.Alias != nil:
		if err := checkAlias(*v.Alias); err != nil {
			return Request{}, err
		}
		r.Alias = *v.Alias
	default:
		return Request{}, bad("give exactly one of sessionId and alias")
	}
	if err := r.message(v, lim); err != nil {
		return Request{}, err
	}
	return r, r.common(v)
}

// ParseControl parses the body of cancel, reset, clear or compact for the
// session sessionID (from the path). With sessionID "" the body must name
// the session itself (the NATS form: {"sessionId", ...}). An empty body is
// an empty object.
func ParseControl(b []byte, kind wire.Kind, sessionID string, lim Limits) (Request, error) {
	switch {
	case kind == wire.KindCancel, kind == wire.KindReset, kind == wire.KindClear, kind == wire.KindCompact:
	case slices.Contains(RuntimeOnlyKinds, kind):
		return Request{}, runtimeOnly(kind)
	default:
		return Request{}, bad("%q is not a control command", kind)
	}
	r, v, err := parseSessionOp(b, sessionID, lim, controlKeys)
	if err != nil {
		return Request{}, err
	}
	r.Kind = kind
	return r, r.common(v)
}

// ParseInput parses POST /v1/sessions/{id}/input: {"requestId","value"}, an
// input.response (never a handoff trigger).
func ParseInput(b []byte, sessionID string, lim Limits) (Request, error) {
	r, v, err := parseSessionOp(b, sessionID, lim, inputKeys)
	if err != nil {
		return Request{}, err
	}
	if v.RequestID == nil || *v.RequestID == "" {
		return Request{}, bad("requestId is required")
	}
	if v.Value == nil {
		return Request{}, bad("value is required (any JSON value but null)")
	}
	r.Kind = wire.KindInputResponse
	r.Input = &wire.InputResponse{RequestID: *v.RequestID, Value: v.Value}
	return r, r.common(v)
}

// ParseAuthorize parses POST /v1/sessions/{id}/authorize:
// {"attemptId","result":"granted"|"denied","data"}.
func ParseAuthorize(b []byte, sessionID string, lim Limits) (Request, error) {
	r, v, err := parseSessionOp(b, sessionID, lim, authorizeKeys)
	if err != nil {
		return Request{}, err
	}
	if v.AttemptID == nil || *v.AttemptID == "" {
		return Request{}, bad("attemptId is required")
	}
	if v.Result == nil || *v.Result != wire.AuthGranted && *v.Result != wire.AuthDenied {
		return Request{}, bad("result must be %q or %q", wire.AuthGranted, wire.AuthDenied)
	}
	r.Kind = wire.KindAuthCallback
	r.Auth = &wire.AuthCallback{AttemptID: *v.AttemptID, Result: *v.Result, Data: v.Data}
	return r, r.common(v)
}

// ParseStatus parses the NATS status request {"sessionId"}.
func ParseStatus(b []byte, lim Limits) (string, error) {
	r, _, err := parseSessionOp(b, "", lim.withDefaults(), nil)
	return r.SessionID, err
}

// StatusRequest is the NATS status body: {"sessionId"} or {"alias"} (the
// session that holds the alias, as GET /v1/sessions?alias=…).
type StatusRequest struct {
	SessionID string
	Alias     string
}

// ParseStatusRequest parses the NATS status body: exactly one of
// sessionId and alias.
func ParseStatusRequest(b []byte) (StatusRequest, error) {
	var v struct {
		SessionID *string `json:"sessionId"`
		Alias     *string `json:"alias"`
	}
	if err := decodeStrict(b, &v, []string{"sessionId", "alias"}); err != nil {
		return StatusRequest{}, bad("%v", err)
	}
	id, alias, err := oneAddress(v.SessionID, v.Alias)
	if err != nil {
		return StatusRequest{}, err
	}
	return StatusRequest{SessionID: id, Alias: alias}, nil
}

// parseSessionOp parses the body of an operation on one session: the ID
// comes from the path, or (pathID "") from the body's sessionId.
func parseSessionOp(b []byte, pathID string, lim Limits, keys []string) (Request, body, error) {
	lim = lim.withDefaults()
	if pathID == "" {
		keys = append([]string{"sessionId"}, keys...)
	}
	var v body
	if len(b) > 0 || pathID == "" {
		var e *Error
		if v, e = parseBody(b, lim, keys); e != nil {
			return Request{}, v, e
		}
	}
	id := pathID
	if pathID == "" {
		if v.SessionID == nil {
			return Request{}, v, bad("sessionId is required")
		}
		id = *v.SessionID
	}
	if err := checkSessionID(id); err != nil {
		return Request{}, v, err
	}
	return Request{SessionID: id}, v, nil
}

// message sets the delivery of a create or deliver request.
func (r *Request) message(v body, lim Limits) error {
	switch {
	case v.Text != nil && v.Payloads != nil:
		return bad("give exactly one of text and payloads, not both")
	case v.Text != nil && *v.Text == "":
		return bad("text is empty")
	case v.Text != nil:
		r.Payloads = []wire.Payload{{Message: wire.TextMessage(*v.Text)}}
	case v.Payloads == nil:
		return bad("give exactly one of text and payloads")
	case len(v.Payloads) == 0:
		return bad("payloads is empty")
	case len(v.Payloads) > lim.MaxPayloads:
		return fail(ErrTooLarge, "%d payloads, the limit is %d", len(v.Payloads), lim.MaxPayloads)
	default:
		ps, err := parsePayloads(v.Payloads)
		if err != nil {
			return err
		}
		r.Payloads = ps
	}
	r.Kind = wire.KindDeliver
	m, ms, err := parseMode(v.Mode, v.Debounce)
	if err != nil {
		return err
	}
	r.Mode, r.DebounceMs = m, ms
	return nil
}

func parsePayloads(raws []json.RawMessage) ([]wire.Payload, error) {
	out := make([]wire.Payload, len(raws))
	for i, raw := range raws {
		if err := decodeStrict(raw, &out[i], payloadKeys); err != nil {
			return nil, bad("payloads[%d]: %v", i, err)
		}
	}
	return out, nil
}

// common checks the members every command may carry.
func (r *Request) common(v body) error {
	if v.Caller != nil {
		if err := checkKey("caller", *v.Caller); err != nil {
			return err
		}
		r.Caller = *v.Caller
	}
	if v.IdempotencyKey != nil {
		if err := checkKey("idempotencyKey", *v.IdempotencyKey); err != nil {
			return err
		}
		r.IdempotencyKey = *v.IdempotencyKey
	}
	if v.Tags != nil && r.Kind != wire.KindTag {
		tags, err := parseTags(v.Tags)
		if err != nil {
			return err
		}
		r.Tags = tags
	}
	if v.Timeout != nil {
		d, err := time.ParseDuration(*v.Timeout)
		if err != nil || d <= 0 {
			return bad("timeout %q: want a positive Go duration such as \"30m\" or \"24h\"", *v.Timeout)
		}
		r.Timeout = *v.Timeout
	}
	return nil
}

func checkKey(name, s string) error {
	if s == "" {
		return bad("%s is empty (omit it instead)", name)
	}
	if len(s) > MaxKeyBytes {
		return bad("%s is %d bytes, at most %d", name, len(s), MaxKeyBytes)
	}
	return nil
}

func checkSessionID(id string) error {
	if err := subjects.ValidateSessionID(id); err != nil {
		return bad("sessionId %q is not a session ID ([A-Za-z0-9_-]{1,128})", clip(id))
	}
	return nil
}

// checkAlias checks that an alias encodes to one subject token.
func checkAlias(alias string) error {
	_, err := subjects.EncodeToken(alias)
	switch {
	case errors.Is(err, subjects.ErrEmptyToken):
		return bad("alias is empty")
	case errors.Is(err, subjects.ErrTokenTooLong):
		return bad("alias is too long: %d bytes encode to more than %d characters (plain [A-Za-z0-9_-] bytes count 1, others 3)", len(alias), subjects.MaxTokenLen)
	case err != nil:
		return bad("alias: %v", err)
	}
	return nil
}

// clip shortens a value quoted in an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// command builds the wire command of r, stamped by deployment dep. Its ID is
// set by the caller.
func (r *Request) command(dep string, now time.Time) wire.Command {
	c := wire.Command{
		V: wire.CurrentVersion, Kind: r.Kind, AcceptedDeploymentID: dep, AcceptedAt: now.UTC(),
		IdempotencyKey: r.IdempotencyKey, Caller: r.Caller,
		InputResponse: r.Input, AuthCallback: r.Auth, Move: r.Move, Tag: r.Tag,
	}
	if r.Kind == wire.KindDeliver {
		c.Deliver = &wire.Deliver{Mode: r.Mode, DebounceMs: r.DebounceMs, Payloads: r.Payloads}
	}
	if r.Kind == wire.KindConfigure {
		c.Configure = r.Configure
	}
	if r.Kind == wire.KindTerminate && r.EndMessage != "" {
		c.Terminate = &wire.Terminate{Message: r.EndMessage}
	}
	return c
}

// encode encodes c for a consumer of wire version v, the version owner (the
// owning deployment) reads, and maps the codec's
// refusals: an invalid value is the client's (400), an oversized one 413,
// a command the version cannot express (or a version this build cannot
// produce) 422 unsupported_command naming the owner.
func encode(v int, owner string, c wire.Command) ([]byte, error) {
	b, err := wire.Encode(wire.Capability{V: v}, c)
	switch {
	case err == nil:
		return b, nil
	case errors.Is(err, wire.ErrTooLarge):
		return nil, fail(ErrTooLarge, "the command encodes to more than %d bytes", wire.MaxCommandBytes)
	case errors.Is(err, wire.ErrUnsupportedTarget) && modeOf(c) != "":
		return nil, unsupportedMode(v, cmp.Or(owner, "(unknown)"), modeOf(c), "owns the session")
	case errors.Is(err, wire.ErrUnsupportedTarget):
		return nil, unsupported(v, owner, c.Kind)
	case errors.Is(err, wire.ErrInvalid), errors.Is(err, wire.ErrUnknownKind):
		var we *wire.Error
		if errors.As(err, &we) && we.Reason != "" {
			return nil, bad("invalid command: %s", we.Reason)
		}
		return nil, bad("invalid command: %v", err)
	}
	return nil, fmt.Errorf("ingress: encode: %w", err)
}

// unsupported refuses a command the owning deployment's inbox wire version
// cannot express: never downgraded, never published.
func unsupported(v int, owner string, kind wire.Kind) *Error {
	if owner == "" {
		owner = "(unknown)"
	}
	if kind == wire.KindTag {
		return tagsUnsupported(owner, fmt.Sprintf("owns the session and reads inbox wire version %d; tags need version %d", v, wire.TagsVersion), "was changed")
	}
	return fail(ErrUnsupportedCommand, "deployment %s owns the session and reads inbox wire version %d, which cannot express this %s command (this ingress produces versions up to %d); nothing was sent",
		owner, v, kind, wire.CurrentVersion)
}
