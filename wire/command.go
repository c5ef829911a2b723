package wire

import (
	"encoding/json"
	"time"
)

// Kind names an inbox command.
type Kind string

// Command kinds (wire version 1).
const (
	KindDeliver       Kind = "deliver"
	KindCancel        Kind = "cancel"
	KindReset         Kind = "reset"
	KindClear         Kind = "clear"
	KindCompact       Kind = "compact"
	KindInputResponse Kind = "input.response"
	KindAuthCallback  Kind = "auth.callback"
	KindTaskResult    Kind = "task.result"
	KindTimeout       Kind = "timeout"
	KindPause         Kind = "pause"
	KindResume        Kind = "resume"
	KindMove          Kind = "move"
)

// Kinds lists every command kind of the current version, in a fixed order.
func Kinds() []Kind {
	return []Kind{
		KindDeliver, KindCancel, KindReset, KindClear, KindCompact,
		KindInputResponse, KindAuthCallback, KindTaskResult, KindTimeout,
		KindPause, KindResume, KindMove,
		KindChildResult, KindChildWaiting, KindChildResumed, KindEnd,
		KindTag, KindTerminate, KindConfigure,
	}
}

// Valid reports whether k is a command kind of the current version.
func (k Kind) Valid() bool {
	_, ok := bodyOf[k]
	return ok
}

// bodyOf maps each kind to the JSON name of its body ("" = no body). The
// body is required, unless the kind's is optional (optionalBody).
var bodyOf = map[Kind]string{
	KindDeliver: "deliver", KindCancel: "", KindReset: "", KindClear: "",
	KindCompact: "", KindInputResponse: "inputResponse",
	KindAuthCallback: "authCallback", KindTaskResult: "taskResult",
	KindTimeout: "timeout", KindPause: "", KindResume: "", KindMove: "move",
	KindChildResult: "childResult", KindChildWaiting: "childWaiting", KindChildResumed: "childResumed", KindEnd: "",
	KindTag: "tag", KindTerminate: "terminate", KindConfigure: "configure",
}

// optionalBody are the kinds whose body may be absent.
var optionalBody = map[Kind]bool{KindTerminate: true}

// Deliver modes.
const (
	ModeQueue = "queue"
	ModeSteer = "steer"
)

// Auth callback results.
const (
	AuthGranted = "granted"
	AuthDenied  = "denied"
)

// Command is the one declared shape of an inbox command at the current wire
// version. The envelope fields are common to every kind; exactly the body
// that belongs to Kind is set (none for cancel, reset, clear, compact, pause,
// resume and end; terminate's is optional). Build it, then Encode it;
// Decode returns it.
type Command struct {
	// V is the wire version. Encode stamps it; Decode returns CurrentVersion.
	V    int  `json:"v"`
	Kind Kind `json:"kind"`
	// ID is unique per command (the ingress uses a ULID).
	ID string `json:"id" jsonschema:"minLength=1,maxLength=128"`
	// AcceptedDeploymentID is the exact deployment of the ingress that
	// accepted the command (never "latest").
	AcceptedDeploymentID string    `json:"acceptedDeploymentId" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=64"`
	AcceptedAt           time.Time `json:"acceptedAt"`
	IdempotencyKey       string    `json:"idempotencyKey,omitempty" jsonschema:"minLength=1,maxLength=256"`
	Caller               string    `json:"caller,omitempty" jsonschema:"minLength=1,maxLength=256"`
	// ParentSessionID, Handle and Depth (version 2) mark a command a parent
	// session's runtime sent its child (a delivery, cancel or end): the
	// parent, the handle it holds the child by, the child's depth. Set by
	// owners only (the ingress refuses it from channels); such a delivery
	// is never a handoff trigger.
	ParentSessionID string `json:"parentSessionId,omitempty" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=128"`
	Handle          string `json:"handle,omitempty" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=64"`
	Depth           int    `json:"depth,omitempty" jsonschema:"minimum=1,maximum=4"`

	Deliver       *Deliver       `json:"deliver,omitempty"`
	InputResponse *InputResponse `json:"inputResponse,omitempty"`
	AuthCallback  *AuthCallback  `json:"authCallback,omitempty"`
	TaskResult    *TaskResult    `json:"taskResult,omitempty"`
	Timeout       *Timeout       `json:"timeout,omitempty"`
	Move          *Move          `json:"move,omitempty"`
	ChildResult   *ChildResult   `json:"childResult,omitempty"`
	ChildWaiting  *ChildWaiting  `json:"childWaiting,omitempty"`
	ChildResumed  *ChildWaiting  `json:"childResumed,omitempty"`
	// Tag (version 3) is the body of a tag command.
	Tag *Tag `json:"tag,omitempty"`
	// Terminate (version 4) is the optional body of a terminate command.
	Terminate *Terminate `json:"terminate,omitempty"`
	// Configure (version 5) is the body of a configure command.
	Configure *Configure `json:"configure,omitempty"`
}

// Deliver is the body of a deliver command. Mode "" (version 5) is the
// session's default mode; DebounceMs (version 5) is a debounce delivery's
// window, required with mode debounce and only with it.
type Deliver struct {
	Mode       string    `json:"mode,omitempty" jsonschema:"enum=queue,enum=steer,enum=reject,enum=interrupt,enum=rollback,enum=debounce,enum=latest"`
	DebounceMs int64     `json:"debounceMs,omitempty" jsonschema:"minimum=250,maximum=600000"`
	Payloads   []Payload `json:"payloads" jsonschema:"minItems=1"`
}

// Payload is one delivered unit. Ext is the one documented extension point:
// channel-adapter fields live there and nowhere else.
type Payload struct {
	Message        *Message                   `json:"message,omitempty"`
	Context        []string                   `json:"context,omitempty"`
	InputResponses []InputResponse            `json:"inputResponses,omitempty"`
	OutputSchema   json.RawMessage            `json:"outputSchema,omitempty"`
	Ext            map[string]json.RawMessage `json:"ext,omitempty"`
}

// InputResponse answers an input request. It is the body of an
// input.response command and an element of Payload.InputResponses.
type InputResponse struct {
	RequestID string          `json:"requestId" jsonschema:"minLength=1,maxLength=128"`
	Value     json.RawMessage `json:"value"`
}

// AuthCallback is the body of an auth.callback command.
type AuthCallback struct {
	AttemptID string          `json:"attemptId" jsonschema:"minLength=1,maxLength=128"`
	Result    string          `json:"result" jsonschema:"enum=granted,enum=denied"`
	Data      json.RawMessage `json:"data,omitempty"`
}

// TaskResult is the body of a task.result command: exactly one of Result
// and Error.
type TaskResult struct {
	TaskID string          `json:"taskId" jsonschema:"minLength=1,maxLength=128"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty" jsonschema:"minLength=1"`
}

// Timeout is the body of a timeout command: the timer that armed it. The
// owner ignores it unless TimerID matches its checkpoint's armed timer.
type Timeout struct {
	TimerID  string    `json:"timerId" jsonschema:"minLength=1,maxLength=128"`
	Deadline time.Time `json:"deadline"`
}

// Move is the body of an operator move command.
type Move struct {
	DeploymentID string `json:"deploymentId" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=64"`
	Force        bool   `json:"force,omitempty"`
}

// Conversational reports whether the command is a conversational delivery,
// the only kind (besides an explicit move) that can trigger a handoff.
func (c *Command) Conversational() bool { return c.Kind == KindDeliver }

// Steer reports whether the command is a steering delivery.
func (c *Command) Steer() bool {
	return c.Kind == KindDeliver && c.Deliver != nil && c.Deliver.Mode == ModeSteer
}

// Text returns the text of every message in a delivery: text messages and
// text parts, joined by newlines. It is "" for other kinds.
func (c *Command) Text() string {
	if c.Deliver == nil {
		return ""
	}
	return PayloadText(c.Deliver.Payloads)
}
