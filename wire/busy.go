package wire

import (
	"encoding/json"
	"fmt"
	"time"
)

// Busy modes (inbox version 5): what a delivery does when the session is
// busy. docs/runtime.md ("Busy modes") holds the table of modes × session
// states × caller that the machine implements.
const (
	// ModeReject: refused (command.rejected, reason "busy") when a turn
	// is active, a debounce window is open or commands wait ahead of it.
	ModeReject = "reject"
	// ModeInterrupt: the caller's running step is aborted; the input
	// joins the same turn, which continues.
	ModeInterrupt = "interrupt"
	// ModeRollback: the caller's running turn is cancelled and its
	// agent-visible effects discarded; the input starts a fresh turn.
	ModeRollback = "rollback"
	// ModeDebounce: deliveries gathered in a window start one turn.
	ModeDebounce = "debounce"
	// ModeLatest: supersedes the caller's deliveries still queued.
	ModeLatest = "latest"
)

// BusyVersion is the inbox version that expresses the busy modes, the
// configure kind and a delivery without a mode.
const BusyVersion = 5

// Modes lists every delivery mode of the current version.
func Modes() []string {
	return []string{ModeQueue, ModeSteer, ModeReject, ModeInterrupt, ModeRollback, ModeDebounce, ModeLatest}
}

// ValidMode reports whether m is a delivery mode of the current version.
func ValidMode(m string) bool {
	for _, x := range Modes() {
		if x == m {
			return true
		}
	}
	return false
}

// LegacyMode reports whether inbox versions before BusyVersion express
// mode m ("" is queue).
func LegacyMode(m string) bool { return m == "" || m == ModeQueue || m == ModeSteer }

// Debounce bounds: a window is at least MinDebounceMs and a delivery may
// ask at most MaxDebounceMs (an owner bounds the whole window further,
// from its first delivery).
const (
	MinDebounceMs = 250
	MaxDebounceMs = 600_000
)

// KindConfigure (inbox version 5) sets the session's default delivery
// mode, used by a delivery that names none.
const KindConfigure Kind = "configure"

// Configure is the body of a configure command: the session's default
// mode, one of Modes ("queue" restores the built-in default), and, for
// "debounce" only, its window (then required: MinDebounceMs to
// MaxDebounceMs).
type Configure struct {
	DefaultMode       string `json:"defaultMode" jsonschema:"enum=queue,enum=steer,enum=reject,enum=interrupt,enum=rollback,enum=debounce,enum=latest"`
	DefaultDebounceMs int64  `json:"defaultDebounceMs,omitempty" jsonschema:"minimum=250,maximum=600000"`
}

// DebounceWindow is an open debounce window (state version 9): the
// debounced deliveries gathered so far, in order, which start one turn
// when the window's timer (TimerID, due at Until) fires. OpenedAt is the
// first delivery's time, from which the owner's maximum counts.
type DebounceWindow struct {
	OpenedAt time.Time   `json:"openedAt"`
	Until    time.Time   `json:"until"`
	TimerID  string      `json:"timerId" jsonschema:"minLength=1"`
	Inputs   []TurnInput `json:"inputs" jsonschema:"minItems=1"`
}

// TurnBefore is what the live turn found when it started (state version
// 9), so a rollback can restore it: the agent state (inline, or StateRef)
// and the history's length (a turn only appends to the history).
type TurnBefore struct {
	State      json.RawMessage `json:"state,omitempty"`
	StateRef   *BlobRef        `json:"stateRef,omitempty"`
	HistoryLen int             `json:"historyLen,omitempty" jsonschema:"minimum=0"`
}

// CallRef names a journaled call a turn made: its name, the step and its
// position among the step's calls (from 0).
type CallRef struct {
	Name     string `json:"name" jsonschema:"minLength=1"`
	Step     uint64 `json:"step" jsonschema:"minimum=1"`
	Position int    `json:"position" jsonschema:"minimum=0"`
}

// validate checks a call reference: a name, a step from 1, a position
// from 0.
func (c CallRef) validate() error {
	if c.Position < 0 {
		return fmt.Errorf("position %d is negative", c.Position)
	}
	return all(nonEmpty("name", c.Name), positive("step", c.Step))
}

// EntryStepInterrupted is the runtime history kind of a step an interrupt
// aborted (a system entry; state version 9).
const EntryStepInterrupted = "step_interrupted"

// RejectBusy: a reject-mode delivery that found the session busy.
const RejectBusy = "busy"

// TerminalKinds are the event kinds that end a command, exactly one per
// accepted command: command.applied, command.rejected, command.superseded
// and wire.rejected (undecodable).
func TerminalKinds() []string {
	return []string{EventCommandApplied, EventCommandRejected, EventCommandSuperseded, EventWireRejected}
}

// command.superseded and turn.rolled_back.
const (
	EventCommandSuperseded = "command.superseded"
	EventTurnRolledBack    = "turn.rolled_back"
)

// CommandSuperseded is emitted instead of command.applied for a queued
// delivery a newer latest-mode delivery of the same caller replaced (By:
// the newer one's sequence).
type CommandSuperseded struct {
	CommandID string `json:"commandId" jsonschema:"minLength=1"`
	Seq       uint64 `json:"seq" jsonschema:"minimum=1"`
	By        uint64 `json:"by" jsonschema:"minimum=1"`
}

// TurnRolledBack follows the events of a turn a rollback cancelled: its
// state and history are back to before it; Calls are the journaled calls
// it made, which Baton cannot undo (written [] when there are none:
// NewEvent and NewBodyEvent write a nil Calls so).
type TurnRolledBack struct {
	TurnID string    `json:"turnId" jsonschema:"minLength=1"`
	Calls  []CallRef `json:"calls"`
}

// EventKind implements EventBody.
func (CommandSuperseded) EventKind() string { return EventCommandSuperseded }

// EventKind implements EventBody.
func (TurnRolledBack) EventKind() string { return EventTurnRolledBack }

// registerBusy adds command.superseded and turn.rolled_back (data
// version 1) to r.
func registerBusy(r *EventRegistry) error {
	return all(
		registerBuiltin(r, EventCommandSuperseded, func(d CommandSuperseded) error {
			return all(nonEmpty("commandId", d.CommandID), positive("seq", d.Seq), positive("by", d.By))
		}),
		registerBuiltin(r, EventTurnRolledBack, func(d TurnRolledBack) error {
			if err := nonEmpty("turnId", d.TurnID); err != nil {
				return err
			}
			for _, c := range d.Calls {
				if err := c.validate(); err != nil {
					return fmt.Errorf("calls: %w", err)
				}
			}
			return nil
		}),
	)
}
