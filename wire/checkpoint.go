package wire

import (
	"encoding/json"
	"time"
)

// CurrentStateVersion is the newest checkpoint state version: this build
// reads every version from MinStateVersion to it, and writes each
// checkpoint at the lowest version that can express its content (so a
// rollback to an older deployment works whenever the session used nothing
// new). A successor that meets a version it does not read refuses the
// checkpoint before it activates (ErrUnsupportedState), so the source keeps
// the session. Any change to the Checkpoint shape bumps it; docs/wire.md
// keeps the history.
//
//	1  the first shape
//	2  out-of-line content: stateRef (agent state in the object store) and
//	   turn.inputs[].textRef (an admitted delivery's text)
//	3  the agent API: structured history entries (kind, content, toolCalls,
//	   toolCallId, isError; historyV on sealed segments), full delivery
//	   payloads of admitted inputs (turn.inputs[].payloads, payloadsRef),
//	   usage (the session's totals and the live turn's)
//	4  task kinds: waits.tasks[].kind, input and inputRef (a task of
//	   another kind than sleep, or with an input)
//	5  subagents: handles, childWaits, parent, sends, turn.delegated and
//	   turn.outputs, turn.inputs[].parent and child
//	6  pending child sends: pendingSends (a child-creating send retried
//	   in the background, with the start of its timeout)
//	7  session tags: tags
//	8  a user's and an idle end: ended "terminated" and "idle_expired"
//	9  busy modes: defaultMode, defaultDebounceMs, debounce (an open
//	   window), turn.before and turn.calls, stored inputs with a busy mode,
//	   history entries of kind step_interrupted
const CurrentStateVersion = 9

// EndStateVersion is the state version that expresses the end reasons
// terminated (a user's terminate command) and idle_expired (no command
// for the owner's idle limit) in Checkpoint.Ended: a checkpoint that ended
// so is written at it, every other keeps its lower version.
const EndStateVersion = 8

// BusyStateVersion is the state version that expresses the busy modes
// (inbox version 5): a session's default mode (DefaultMode,
// DefaultDebounceMs), an open debounce window (Debounce), what the live
// turn found when it started and the calls it made (Turn.Before,
// Turn.Calls, for a rollback), an admitted input of a busy mode (a mode
// other than queue and steer) and an inline history entry of kind
// step_interrupted. A checkpoint that uses any of them is written at it;
// every other keeps its lower version.
const BusyStateVersion = 9

// MinStateVersion is the oldest checkpoint state version this build reads.
const MinStateVersion = 1

// Checkpoint is the settled state of a session, committed with its applied
// commands and outbox in one CAS of the session record. It carries no
// command backlog and no live waits across deployments (see docs/handoff.md);
// Waits is only ever non-empty on the deployment that owns the session.
type Checkpoint struct {
	StateV    int    `json:"stateV"`
	SessionID string `json:"sessionId" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=128"`

	// History is the private model history: sealed segments in the object
	// store (immutable, content-addressed, in order), then the inline tail.
	// The owner seals the tail into a new segment before it would pass
	// MaxInlineBytes, so a session's record stays small however long it
	// lives; each commit writes at most one new segment.
	HistorySegments []BlobRef      `json:"historySegments,omitempty"`
	History         []HistoryEntry `json:"history,omitempty"`
	// HistoryV is 3 when a sealed segment holds structured entries (state
	// version 3): an older owner decodes segments as {role, text}. 0
	// otherwise.
	HistoryV int `json:"historyV,omitempty" jsonschema:"enum=0,enum=3"`
	// State is the authored agent state, opaque to Baton; likewise inline
	// or under StateRef.
	State    json.RawMessage `json:"state,omitempty"`
	StateRef *BlobRef        `json:"stateRef,omitempty"`

	Initiator    Initiator       `json:"initiator,omitzero"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Compaction   Compaction      `json:"compaction,omitzero"`

	// EventSeq is the seq of the last committed event (outbox included).
	EventSeq uint64 `json:"eventSeq"`
	// Limits are the remaining budgets by name (for example "turns").
	Limits map[string]int64 `json:"limits,omitempty"`
	// Usage is the session's total reported usage (state version 3): the
	// used counters of the token limits, carried across every handoff.
	Usage Usage `json:"usage,omitzero"`

	// Tokens is the complete claimed address set (raw addresses; the first
	// is the stable one). PendingAliases are committed but not yet claimed.
	Tokens         []string `json:"tokens" jsonschema:"minItems=1"`
	PendingAliases []string `json:"pendingAliases,omitempty"`

	// Timeout is the configured session-lifetime duration (0: none); Timer
	// is the armed timer a timeout command must match.
	Timeout time.Duration `json:"timeoutNs,omitempty" jsonschema:"minimum=0"`
	Timer   *Timer        `json:"timer,omitempty"`

	Applied Applied   `json:"applied"`
	Outbox  []Event   `json:"outbox,omitempty"`
	Waits   Waits     `json:"waits,omitzero"`
	Turn    TurnState `json:"turn,omitzero"`
	Paused  bool      `json:"paused,omitempty"`

	// Handles are the session's child handles, ChildWaits its descendants'
	// outstanding waits, Parent (for a child) the parent that holds it and
	// Sends the commands the commit sends to other sessions (state
	// version 5).
	Handles    []HandleState `json:"handles,omitempty"`
	ChildWaits []ChildWait   `json:"childWaits,omitempty"`
	Parent     *ParentRef    `json:"parent,omitempty"`
	Sends      []Send        `json:"sends,omitempty"`
	// PendingSends are the child-creating sends that have not left yet
	// (state version 6): kept across commits until the child is created
	// or the send fails.
	PendingSends []PendingSend `json:"pendingSends,omitempty"`
	// Tags are the session's tags (state version 7; ValidateTags): written
	// only when the session has tags.
	Tags map[string]string `json:"tags,omitempty"`
	// DefaultMode and DefaultDebounceMs are the session's default
	// delivery mode (a configure command's; "" is the built-in default,
	// queue) and its debounce window (only with debounce), and Debounce
	// its open debounce window (state version 9, BusyStateVersion).
	DefaultMode       string          `json:"defaultMode,omitempty" jsonschema:"enum=queue,enum=steer,enum=reject,enum=interrupt,enum=rollback,enum=debounce,enum=latest"`
	DefaultDebounceMs int64           `json:"defaultDebounceMs,omitempty" jsonschema:"minimum=250,maximum=600000"`
	Debounce          *DebounceWindow `json:"debounce,omitempty"`
	// BusyModes marks a session that used a busy mode (a delivery of
	// another mode than queue and steer, or a configure command): from
	// then on its live turn's Before and Calls are kept (state version 9).
	// A session that never did keeps checkpoints an older build reads,
	// mid-turn too.
	BusyModes bool `json:"busyModes,omitempty"`

	// Started is set by the first commit (session.started recorded); Ended
	// names the end reason once finalized: done, expired, failed, closed
	// (state version 5), terminated or idle_expired (EndStateVersion).
	Started bool   `json:"started,omitempty"`
	Ended   string `json:"ended,omitempty" jsonschema:"enum=,enum=done,enum=expired,enum=failed,enum=closed,enum=terminated,enum=idle_expired"`
	Writer  Writer `json:"writer,omitzero"`
}

// HistoryEntry is one entry of the private model history. State versions 1
// and 2 know the legacy shape {role, text} with the roles user, agent,
// input, auth, task and summary; state version 3 adds the structured shape
// (roles system, user, assistant and tool; Kind, Content, ToolCalls,
// ToolCallID, IsError). A checkpoint keeps an entry in the legacy shape
// whenever it fits (Compact), so a session that used nothing new stays
// readable by older owners; Migrate turns a legacy entry into the
// structured one (docs/wire.md, "History entries").
type HistoryEntry struct {
	Role string          `json:"role" jsonschema:"minLength=1"`
	Text string          `json:"text,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`

	Kind       string     `json:"kind,omitempty"`
	Content    []Part     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"toolCalls,omitempty"`
	ToolCallID string     `json:"toolCallId,omitempty"`
	IsError    bool       `json:"isError,omitempty"`
}

// Initiator is who started the session and the auth context it carries.
type Initiator struct {
	Caller       string          `json:"caller,omitempty"`
	DeploymentID string          `json:"deploymentId,omitempty"`
	Auth         json.RawMessage `json:"auth,omitempty"`
}

// Compaction accounts for history compaction.
type Compaction struct {
	Count          uint64 `json:"count,omitempty"`
	DroppedEntries uint64 `json:"droppedEntries,omitempty"`
}

// Timer is an armed session timer.
type Timer struct {
	ID       string        `json:"id" jsonschema:"minLength=1"`
	Deadline time.Time     `json:"deadline"`
	Duration time.Duration `json:"durationNs,omitempty" jsonschema:"minimum=0"` // original configured timeout
}

// Waits lists what the session waits for: input request IDs, auth attempt
// IDs and task IDs. A session with waits is not idle.
type Waits struct {
	Input *InputWait `json:"input,omitempty"`
	Auth  *AuthWait  `json:"auth,omitempty"`
	Tasks []TaskWait `json:"tasks,omitempty"`
}

// InputWait is a pending human-input request.
type InputWait struct {
	RequestID string `json:"requestId" jsonschema:"minLength=1"`
	Question  string `json:"question,omitempty"`
}

// AuthWait is the current authorization attempt; a newer one replaces it.
type AuthWait struct {
	AttemptID string `json:"attemptId" jsonschema:"minLength=1"`
}

// TaskWait is a live background task: its ID, its kind and its input
// (inline, or InputRef when over MaxInlineTextBytes), and a sleep task's
// Duration. A task without a kind is a "sleep" task (state versions 1 to
// 3 knew no other kind); a sleep task without input is written without its
// kind, so the checkpoint stays readable by those versions.
type TaskWait struct {
	ID       string          `json:"id" jsonschema:"minLength=1"`
	Duration time.Duration   `json:"durationNs,omitempty" jsonschema:"minimum=0"`
	Kind     string          `json:"kind,omitempty" jsonschema:"minLength=1,maxLength=64"`
	Input    json.RawMessage `json:"input,omitempty"`
	InputRef *BlobRef        `json:"inputRef,omitempty"`
}

// TaskSleep is the built-in task kind: wait Duration, then report.
const TaskSleep = "sleep"

// KindOf is the task's kind: "sleep" when none is recorded.
func (t TaskWait) KindOf() string { return TaskKind(t.Kind) }

// TaskKind is kind, or "sleep" for a task that names none (one recorded
// or published by a build before task kinds).
func TaskKind(kind string) string {
	if kind == "" {
		return TaskSleep
	}
	return kind
}

// Empty reports whether nothing is awaited.
func (w Waits) Empty() bool {
	return w.Input == nil && w.Auth == nil && len(w.Tasks) == 0
}

// TurnState is the turn accounting: Count turns started so far; while Open,
// turn Count is running and Step steps of it have been committed (steering
// is admitted at those boundaries).
type TurnState struct {
	Count     uint64      `json:"count,omitempty"`
	Live      bool        `json:"live,omitempty"` // a turn is open or parked
	ID        string      `json:"id,omitempty"`
	Caller    string      `json:"caller,omitempty"`
	Open      bool        `json:"open,omitempty"`
	Step      uint64      `json:"step,omitempty"`
	CommandID string      `json:"commandId,omitempty"`
	Inputs    []TurnInput `json:"inputs,omitempty"`
	// Usage is the live turn's accumulated usage (state version 3).
	Usage Usage `json:"usage,omitzero"`
	// Delegated marks a turn a parent's delivery started (state version
	// 5): when it settles, its Outputs (message.output texts) and usage go
	// back to the parent as child.result.
	Delegated bool     `json:"delegated,omitempty"`
	Outputs   []string `json:"outputs,omitempty"`
	// Before is what the turn found when it started and Calls the
	// journaled calls it made so far (state version 9): a rollback
	// restores the one and reports the other.
	Before *TurnBefore `json:"before,omitempty"`
	Calls  []CallRef   `json:"calls,omitempty"`
}

// TurnInput is the owner's decoded view of an inbox command, with its
// stream sequence: what the session machine processes (runtime.Command is
// this type; DecodeInput builds it from an inbox payload) and, for a command
// admitted into the live turn but not yet seen by a step (a steer that
// joined, an answer that reopened the turn), what the checkpoint stores.
// Only the fields that belong to Kind are set.
type TurnInput struct {
	Seq        uint64          `json:"seq"`
	ID         string          `json:"id" jsonschema:"minLength=1"`
	Kind       Kind            `json:"kind" jsonschema:"minLength=1"`
	Mode       string          `json:"mode,omitempty"`
	Caller     string          `json:"caller,omitempty"`
	Deployment string          `json:"deployment,omitempty"`
	Text       string          `json:"text,omitempty"`
	RequestID  string          `json:"requestId,omitempty"`
	Value      json.RawMessage `json:"value,omitempty"`
	AttemptID  string          `json:"attemptId,omitempty"`
	AuthResult string          `json:"authResult,omitempty"`
	TaskID     string          `json:"taskId,omitempty"`
	TaskError  string          `json:"taskError,omitempty"`
	TimerID    string          `json:"timerId,omitempty"`
	Target     string          `json:"target,omitempty"`
	// Force is a move's: it is never stored, because a move is applied at
	// once and never waits in a turn (json "-": the checkpoint shape of
	// state versions 1 and 2 has no such member).
	Force bool `json:"-"`
	// Rejected is set when the inbox payload could not be decoded (for
	// example a newer wire version): the reason. The machine records
	// wire.rejected for it and never applies it.
	Rejected string `json:"rejected,omitempty"`
	// Refused is set by the owner's driver, never by DecodeInput, when it
	// refuses to apply a command it decoded: the reason (a Reject…
	// constant, e.g. RejectAgentMismatch for a delivery or move stamped
	// by another agent's deployment). The machine records
	// command.rejected for it instead of command.applied and never
	// applies it: it triggers no handoff and never joins a turn. It is
	// never stored (json "-"), because a refused command is never
	// admitted into a turn.
	Refused string `json:"-"`
	// TextRef holds Text out of line (state version 2) when it is longer
	// than MaxInlineTextBytes; Text is then empty.
	TextRef *BlobRef `json:"textRef,omitempty"`
	// Payloads are a delivery's payloads as sent (DecodeInput sets them).
	// A checkpoint stores them only when Text cannot say the same thing
	// (CompactInput; state version 3), and then without Text, which
	// ExpandInput derives again; PayloadsRef holds them out of line when
	// their encoding is longer than MaxInlineTextBytes.
	Payloads    []Payload `json:"payloads,omitempty"`
	PayloadsRef *BlobRef  `json:"payloadsRef,omitempty"`
	// Parent is set on a command a parent session sent (inbox version 2's
	// parentSessionId, handle, depth); Child on child.result,
	// child.waiting and child.resumed (state version 5 when stored).
	Parent *ParentRef `json:"parent,omitempty"`
	Child  *ChildRef  `json:"child,omitempty"`
	// Tag is a tag command's body (inbox version 3). The tag command is
	// applied at once, at a boundary, and never stored in a checkpoint's
	// turn (the checkpoint's schema has no such member of turn.inputs, and
	// its rules refuse it), nor sent to a remote agent (AgentInputs).
	Tag *Tag `json:"tag,omitempty"`
	// EndMessage is a terminate command's message (inbox version 4; ""
	// for none). It is never stored (json "-"), because a terminate is
	// applied at once and never waits in a turn (the Go rules refuse a
	// stored input of kind terminate), nor sent to a remote agent.
	EndMessage string `json:"-"`
	// DebounceMs is a debounce delivery's window (inbox version 5). It is
	// never stored: a delivery in a debounce window has joined it.
	DebounceMs int64 `json:"-"`
	// DefaultMode and DefaultDebounceMs are a configure command's body
	// (inbox version 5), applied at once and never stored.
	DefaultMode       string `json:"-"`
	DefaultDebounceMs int64  `json:"-"`
	// Superseded is set by the machine, never stored: the sequence of the
	// newer latest-mode delivery that superseded this queued one.
	Superseded uint64 `json:"-"`
	// Interrupts is set by the machine, never stored: the live turn an
	// interrupt or rollback delivery acts on (its caller's turn, live when
	// the owner received it).
	Interrupts string `json:"-"`
}

// Writer identifies the write that produced a checkpoint: the owner run and
// its write counter, so an uncertain write can be settled by reading back.
type Writer struct {
	RunID string `json:"runId,omitempty"`
	Write uint64 `json:"write,omitempty"`
}
