package wire

import (
	"crypto/sha256"
	"encoding/base32"
	"strconv"
)

// Subagents: the durable shapes of child sessions (docs/runtime.md,
// "Subagents"). A parent session delegates a turn to a child session
// through a handle; the shapes here cross three boundaries:
//
//   - inbox (version 2): the envelope's ParentSessionID, Handle and Depth on
//     a parent's delivery to its child (and on the cancel and end it sends
//     it); the kinds child.result, child.waiting, child.resumed (child to
//     parent) and end (parent to child);
//   - events: child.started, child.completed, child.waiting, child.closed
//     (new kinds), session.ended data version 3 (reason closed) and
//     handoff.skipped data version 2 (reason child);
//   - checkpoint (state version 5): handles, childWaits, the child's parent
//     reference and depth, a delegated turn's outputs, and the commands the
//     last commit sends (sends).

// Inbox kinds of version 2.
const (
	// KindChildResult: a child's delegated turn settled (child → parent).
	KindChildResult Kind = "child.result"
	// KindChildWaiting: a child's delegated turn waits for input or an
	// authorization (child → parent).
	KindChildWaiting Kind = "child.waiting"
	// KindChildResumed: the child no longer waits (child → parent).
	KindChildResumed Kind = "child.resumed"
	// KindEnd ends the session (reason closed): a parent closing its
	// handle, or ending with its children. Runtime-internal: the ingress
	// refuses it from channels.
	KindEnd Kind = "end"
)

// Child outcomes of child.result and child.completed.
const (
	ChildDone      = "done"
	ChildFailed    = "failed"
	ChildCancelled = "cancelled"
)

// Handle states (checkpoint handles[].state, GET /v1/sessions/{id}).
const (
	HandleActive    = "active"    // a delegated turn runs: the parent is not idle
	HandleParked    = "parked"    // idle: the child's stable address only
	HandleAvailable = "available" // a handle a finished task produced
	HandleClosed    = "closed"    // the child was ended; the name may be reused
)

// Limits of delegation.
const (
	// MaxHandles is the number of handles a session may hold open (not
	// closed) at once.
	MaxHandles = 32
	// MaxDepth is the deepest delegation: a root session is depth 0, its
	// children 1, …; a session at MaxDepth cannot delegate.
	MaxDepth = 4
	// MaxDelegateBytes bounds one delegated message (its payloads' JSON).
	MaxDelegateBytes = 64 << 10
)

// EndClosed is session.ended's reason for a child its parent closed (data
// version 3).
const EndClosed = "closed"

// SkipChild is handoff.skipped's reason for a session with an active
// handle or an outstanding child wait (data version 2).
const SkipChild = "child"

// Codes of failed steps and errors of delegation.
const (
	CodeHandleLimit      = "handle_limit"      // MaxHandles open handles
	CodeDepthLimit       = "depth_limit"       // the session is at MaxDepth
	CodeChildUnsupported = "child_unsupported" // the target deployment does not read inbox version 2
	CodeHandleBusy       = "handle_busy"       // the handle has an active delegated turn
	CodeHandleUnknown    = "handle_unknown"    // no such open handle (close)
	CodeDelegateInvalid  = "delegate_invalid"  // a malformed Delegate (handle name, deployment, no message, too large)
	// CodeChildUnavailable: the child could not be created — its
	// deployment is retired, or no owner of it answered within the
	// child-send timeout.
	CodeChildUnavailable = "child_unavailable"
	// CodeChildGone: the delegation's child has ended (or cannot read it).
	CodeChildGone = "child_gone"
)

// ChildResult is the body of child.result: the child's delegated turn
// TurnID (started by the parent's delivery CommandID) settled with Outcome;
// Outputs are its message.output texts, Usage its summed usage. Ended is
// the child's end reason when the turn ended with the session.
type ChildResult struct {
	Handle         string   `json:"handle" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=64"`
	ChildSessionID string   `json:"childSessionId" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=128"`
	CommandID      string   `json:"commandId" jsonschema:"minLength=1,maxLength=256"`
	TurnID         string   `json:"turnId" jsonschema:"minLength=1,maxLength=128"`
	Outcome        string   `json:"outcome" jsonschema:"enum=done,enum=failed,enum=cancelled"`
	Outputs        []string `json:"outputs,omitempty"`
	Usage          Usage    `json:"usage,omitzero"`
	Error          string   `json:"error,omitempty" jsonschema:"minLength=1"`
	Ended          string   `json:"ended,omitempty" jsonschema:"minLength=1,maxLength=64"`
}

// ChildWaiting is the body of child.waiting (exactly one of RequestID and
// AttemptID) and of child.resumed (Question empty).
type ChildWaiting struct {
	Handle         string `json:"handle" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=64"`
	ChildSessionID string `json:"childSessionId" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=128"`
	RequestID      string `json:"requestId,omitempty" jsonschema:"minLength=1,maxLength=128"`
	AttemptID      string `json:"attemptId,omitempty" jsonschema:"minLength=1,maxLength=128"`
	Question       string `json:"question,omitempty"`
}

// ChildRef is what an owner's view of a command (TurnInput.Child) carries
// of a child.* command's body.
type ChildRef struct {
	Handle    string   `json:"handle" jsonschema:"minLength=1"`
	SessionID string   `json:"sessionId" jsonschema:"minLength=1"`
	CommandID string   `json:"commandId,omitempty"`
	TurnID    string   `json:"turnId,omitempty"`
	Outcome   string   `json:"outcome,omitempty"`
	Outputs   []string `json:"outputs,omitempty"`
	Usage     Usage    `json:"usage,omitzero"`
	Error     string   `json:"error,omitempty"`
	Ended     string   `json:"ended,omitempty"`
	Question  string   `json:"question,omitempty"`
}

// ParentRef is a child's reference to its parent: the parent session, the
// handle it holds the child by and the child's delegation depth.
type ParentRef struct {
	SessionID string `json:"sessionId" jsonschema:"minLength=1"`
	Handle    string `json:"handle" jsonschema:"minLength=1"`
	Depth     int    `json:"depth" jsonschema:"minimum=1,maximum=4"`
}

// ChildAlias is the alias a child session is created under, so a retried
// creation finds the same session: child.<parent>.<handle>.<generation>.
func ChildAlias(parentSessionID, handle string, generation int) string {
	return "child." + parentSessionID + "." + handle + "." + strconv.Itoa(generation)
}

// Parent-side events (new kinds, data version 1).
const (
	EventChildStarted   = "child.started"
	EventChildCompleted = "child.completed"
	EventChildWaiting   = "child.waiting"
	EventChildClosed    = "child.closed"
)

// ChildStarted: the handle's child session exists and received its first
// delegated message.
type ChildStarted struct {
	Handle         string `json:"handle" jsonschema:"minLength=1"`
	ChildSessionID string `json:"childSessionId" jsonschema:"minLength=1"`
	DeploymentID   string `json:"deploymentId" jsonschema:"minLength=1"`
}

// ChildCompleted: the handle's delegated turn settled.
type ChildCompleted struct {
	Handle         string `json:"handle" jsonschema:"minLength=1"`
	ChildSessionID string `json:"childSessionId" jsonschema:"minLength=1"`
	TurnID         string `json:"turnId" jsonschema:"minLength=1"`
	Outcome        string `json:"outcome" jsonschema:"enum=done,enum=failed,enum=cancelled"`
}

// ChildCompletedV2 is data version 2 of child.completed: version 1 plus
// Error, the runtime's reason for a failed delegation that no child turn
// ran (its child could not be created, or has ended). It is written only
// with an error (LowestChildCompleted).
type ChildCompletedV2 struct {
	Handle         string      `json:"handle" jsonschema:"minLength=1"`
	ChildSessionID string      `json:"childSessionId" jsonschema:"minLength=1"`
	TurnID         string      `json:"turnId" jsonschema:"minLength=1"`
	Outcome        string      `json:"outcome" jsonschema:"enum=done,enum=failed,enum=cancelled"`
	Error          *ChildError `json:"error,omitempty"`
}

// ChildError is a failed delegation's error: a stable code
// (child_unavailable, child_gone) and a message.
type ChildError struct {
	Code    string `json:"code" jsonschema:"enum=child_unavailable,enum=child_gone"`
	Message string `json:"message"`
}

// ChildWaitingEvent: a descendant waits for input or an authorization;
// answer it through the child's (or this session's) input route.
type ChildWaitingEvent struct {
	Handle         string `json:"handle" jsonschema:"minLength=1"`
	ChildSessionID string `json:"childSessionId" jsonschema:"minLength=1"`
	RequestID      string `json:"requestId,omitempty"`
	AttemptID      string `json:"attemptId,omitempty"`
	Question       string `json:"question,omitempty"`
}

// ChildClosed: the handle was closed (its child ended or is being ended).
type ChildClosed struct {
	Handle         string `json:"handle" jsonschema:"minLength=1"`
	ChildSessionID string `json:"childSessionId,omitempty"`
}

// SessionEndedV3 is data version 3 of session.ended: version 2's reasons
// plus closed (the parent closed the child's handle).
type SessionEndedV3 struct {
	Reason string `json:"reason" jsonschema:"enum=done,enum=expired,enum=failed,enum=cancelled,enum=terminated,enum=closed"`
}

// HandoffSkippedV2 is data version 2 of handoff.skipped: version 1's
// reasons plus child.
type HandoffSkippedV2 struct {
	Reason             string `json:"reason" jsonschema:"enum=busy,enum=queued,enum=input,enum=authorization,enum=task,enum=paused,enum=child"`
	CommandID          string `json:"commandId" jsonschema:"minLength=1"`
	Seq                uint64 `json:"seq" jsonschema:"minimum=1"`
	DeploymentID       string `json:"deploymentId"`
	TargetDeploymentID string `json:"targetDeploymentId"`
}

// HandleState is one handle of a session's checkpoint (state version 5).
// Generation counts the handle name's children (the alias's last part);
// ChildSessionID is derived from parent, handle and generation
// (ChildSessionID), so it is known from the commit that opens the handle.
// While active, TurnID is the parent's turn that delegated, CommandID the
// delegated delivery's ID (the child.result that answers it names it) and
// Wait whether that turn waits for the result.
type HandleState struct {
	Handle         string `json:"handle" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=64"`
	Generation     int    `json:"generation" jsonschema:"minimum=1"`
	ChildSessionID string `json:"childSessionId,omitempty" jsonschema:"pattern=^[A-Za-z0-9_-]+$,maxLength=128"`
	DeploymentID   string `json:"deploymentId" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=64"`
	State          string `json:"state" jsonschema:"enum=active,enum=parked,enum=available,enum=closed"`
	TurnID         string `json:"turnId,omitempty"`
	CommandID      string `json:"commandId,omitempty"`
	Wait           bool   `json:"wait,omitempty"`
}

// ChildWait is a descendant's outstanding wait (checkpoint childWaits).
type ChildWait struct {
	Handle         string `json:"handle" jsonschema:"minLength=1"`
	ChildSessionID string `json:"childSessionId" jsonschema:"minLength=1"`
	RequestID      string `json:"requestId,omitempty"`
	AttemptID      string `json:"attemptId,omitempty"`
	Question       string `json:"question,omitempty"`
}

// Send is a command the commit that holds it sends to another session's
// stable inbox (checkpoint sends, like the outbox: the next commit
// replaces it, and an owner that boots sends them again; the message ID is
// the command ID, and receivers deduplicate by it). With Alias set, the
// target is a child to create first if it does not exist: a start request
// to DeploymentID's owners for session SessionID under Alias, with Tags
// (state version 7; only with Alias): the new child's tags.
type Send struct {
	SessionID    string            `json:"sessionId" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=128"`
	DeploymentID string            `json:"deploymentId,omitempty" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=64"`
	Alias        string            `json:"alias,omitempty" jsonschema:"minLength=1,maxLength=512"`
	Command      Command           `json:"command"`
	Tags         map[string]string `json:"tags,omitempty"`
}

// ChildSessionID is the session ID of the child a parent holds by handle
// at generation: derived (26 characters of base32 of a SHA-256), so the
// commit that opens the handle names the child, and a retried creation
// asks for the same session.
func ChildSessionID(parentSessionID, handle string, generation int) string {
	sum := sha256.Sum256([]byte(ChildAlias(parentSessionID, handle, generation)))
	return "C" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])[:25]
}

func (ChildStarted) EventKind() string      { return EventChildStarted }
func (ChildCompleted) EventKind() string    { return EventChildCompleted }
func (ChildCompletedV2) EventKind() string  { return EventChildCompleted }
func (ChildWaitingEvent) EventKind() string { return EventChildWaiting }
func (ChildClosed) EventKind() string       { return EventChildClosed }
func (SessionEndedV3) EventKind() string    { return EventSessionEnded }
func (HandoffSkippedV2) EventKind() string  { return EventHandoffSkipped }

// DataVersion is the data version a SessionEndedV3 is recorded at.
func (SessionEndedV3) DataVersion() int { return 3 }

// DataVersion is the data version a ChildCompletedV2 is recorded at.
func (ChildCompletedV2) DataVersion() int { return 2 }

// DataVersion is the data version a HandoffSkippedV2 is recorded at.
func (HandoffSkippedV2) DataVersion() int { return 2 }

// ActiveChildren counts what keeps a session busy with its children: its
// active handles and its descendants' outstanding waits.
func (c *Checkpoint) ActiveChildren() int { return ActiveChildren(c.Handles, c.ChildWaits) }

// ActiveChildren is the count of active handles plus outstanding
// descendant waits: the idle rule's child reason, wherever the handles
// are read (a checkpoint, the machine's snapshot).
func ActiveChildren(handles []HandleState, waits []ChildWait) int {
	n := len(waits)
	for _, h := range handles {
		if h.State == HandleActive {
			n++
		}
	}
	return n
}

// CloseCommandID is the ID of the end a parent sends the child of handle
// at generation when it closes it; ResultCommandID is the ID of the
// child.result a child sends for its delegated turn. Every producer (the
// machine, the ingress's end of a quarantined session) uses them, so the
// receiver deduplicates one producer's command against the other's.
func CloseCommandID(parentSessionID, handle string, generation int) string {
	return parentSessionID + "/close/" + handle + "." + strconv.Itoa(generation)
}

// ResultCommandID: see CloseCommandID.
func ResultCommandID(childSessionID, turnID string) string {
	return childSessionID + "/" + turnID + "/result"
}
