package wire

import (
	"encoding/json"
	"time"
)

// CurrentStateVersion is the checkpoint state version this build writes and
// the only one it reads. A successor that meets another version refuses the
// checkpoint before it activates (ErrUnsupportedState), so the source keeps
// the session. Any change to the Checkpoint shape bumps it.
const CurrentStateVersion = 1

// Checkpoint is the settled state of a session, committed with its applied
// commands and outbox in one CAS of the session record. It carries no
// command backlog and no live waits across deployments (see DESIGN.md §6);
// Waits is only ever non-empty on the deployment that owns the session.
type Checkpoint struct {
	StateV    int    `json:"stateV"`
	SessionID string `json:"sessionId" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=128"`

	// History is the private model history, inline while it is small;
	// beyond MaxInlineBytes it lives in the object store under HistoryRef.
	History    []HistoryEntry `json:"history,omitempty"`
	HistoryRef *BlobRef       `json:"historyRef,omitempty"`
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
}

// HistoryEntry is one entry of the private model history.
type HistoryEntry struct {
	Role string          `json:"role" jsonschema:"minLength=1"`
	Text string          `json:"text,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
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
	ID       string    `json:"id" jsonschema:"minLength=1"`
	Deadline time.Time `json:"deadline"`
}

// Waits lists what the session waits for: input request IDs, auth attempt
// IDs and task IDs. A session with waits is not idle.
type Waits struct {
	Inputs       []string `json:"inputs,omitempty"`
	AuthAttempts []string `json:"authAttempts,omitempty"`
	Tasks        []string `json:"tasks,omitempty"`
}

// Empty reports whether nothing is awaited.
func (w Waits) Empty() bool {
	return len(w.Inputs) == 0 && len(w.AuthAttempts) == 0 && len(w.Tasks) == 0
}

// TurnState is the turn accounting: Count turns started so far; while Open,
// turn Count is running and Step steps of it have been committed (steering
// is admitted at those boundaries).
type TurnState struct {
	Count     uint64 `json:"count,omitempty"`
	Open      bool   `json:"open,omitempty"`
	Step      uint64 `json:"step,omitempty"`
	CommandID string `json:"commandId,omitempty"`
}
