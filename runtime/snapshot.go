package runtime

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/baton-rt/baton/wire"
)

// Snapshot is the machine's whole durable state. The driver commits it in
// one CAS of the session record; a successor (crash recovery, wake or
// handoff) resumes from it with [NewMachine]. It is plain JSON.
type Snapshot struct {
	Started  bool            `json:"started,omitempty"`
	Applied  Applied         `json:"applied"`
	EventSeq uint64          `json:"eventSeq"` // seq of the last committed event
	Turns    uint64          `json:"turns"`    // turns started so far (turn IDs)
	History  []Entry         `json:"history,omitempty"`
	State    json.RawMessage `json:"state,omitempty"` // the agent's own state
	Turn     *Turn           `json:"turn,omitempty"`
	Waits    Waits           `json:"waits"`
	Paused   bool            `json:"paused,omitempty"`
	Timer    *Timer          `json:"timer,omitempty"`
	Aliases  []string        `json:"aliases,omitempty"`
	Ended    string          `json:"ended,omitempty"` // done|expired|failed
	Outbox   []Event         `json:"outbox,omitempty"`
	Writer   Writer          `json:"writer"`
	// Usage is the session's total reported usage: the used counter of
	// the session token limit, carried across handoffs in the checkpoint.
	Usage Usage `json:"usage,omitzero"`
	// Tags are the session's tags (at most wire.MaxTags): set when it is
	// created, changed by tag commands, carried across handoffs.
	Tags map[string]string `json:"tags,omitempty"`

	// Handles are the session's child handles (see [Delegate]); ChildWaits
	// its descendants' outstanding waits; Parent, for a child, the parent
	// that holds it; Sends the commands the last commit sends to other
	// sessions (re-sent by an owner that boots, like the outbox).
	Handles    []Handle    `json:"handles,omitempty"`
	ChildWaits []ChildWait `json:"childWaits,omitempty"`
	Parent     *ParentRef  `json:"parent,omitempty"`
	Sends      []Send      `json:"sends,omitempty"`
	// PendingSends are the child-creating sends the driver could not
	// deliver (no live owner of the child's deployment): kept across
	// commits until they leave ([SendsLeft]) or their handle settles.
	PendingSends []PendingSend `json:"pendingSends,omitempty"`

	// DefaultMode is the mode of a delivery that names none ("" is
	// queue) and DefaultDebounceMs its window when it is debounce: set by
	// a configure command. Debounce is the open debounce window.
	DefaultMode       string  `json:"defaultMode,omitempty"`
	DefaultDebounceMs int64   `json:"defaultDebounceMs,omitempty"`
	Debounce          *Window `json:"debounce,omitempty"`
	// BusyModes marks a session that used a busy mode (a delivery of
	// another mode than queue and steer, or a configure): from then on
	// the driver keeps its live turn's Before and Calls in the checkpoint
	// (state version 9). Before it, they live in the machine only, so a
	// session that never used one keeps checkpoints an older build reads.
	BusyModes bool `json:"busyModes,omitempty"`
}

// Window is an open debounce window: the debounced deliveries gathered so
// far, which start one turn when the timer TimerID fires (due at Until,
// never later than OpenedAt plus the owner's maximum).
type Window struct {
	OpenedAt time.Time `json:"openedAt"`
	Until    time.Time `json:"until"`
	TimerID  string    `json:"timerId"`
	Inputs   []Command `json:"inputs"`
}

// Before is what a turn found when it started, for a rollback: the agent
// state (shared with the snapshot it was taken from: a state is replaced
// whole, never written in place) and the history's length (a turn only
// appends to the history).
type Before struct {
	State      json.RawMessage `json:"state,omitempty"`
	HistoryLen int             `json:"historyLen"`
}

// Applied is the record of exactly which commands were processed (applied,
// or rejected as undecodable). Next is the lowest inbox sequence that may
// still be unprocessed: the consumer restarts there and the stream may be
// purged below it. Above holds the processed sequences at or above Next
// (steering and cancellation apply out of arrival order). RecentIDs are the
// most recent applied command IDs, for deduplication by ID.
type Applied struct {
	Next      uint64   `json:"next"`
	Above     []uint64 `json:"above,omitempty"`
	RecentIDs []string `json:"recentIds,omitempty"`
}

// Has reports whether seq was processed.
func (a *Applied) Has(seq uint64) bool {
	if seq < a.Next {
		return true
	}
	_, ok := slices.BinarySearch(a.Above, seq)
	return ok
}

// HasID reports whether id is among the recent applied IDs.
func (a *Applied) HasID(id string) bool { return slices.Contains(a.RecentIDs, id) }

func (a *Applied) add(seq uint64, id string, keep int) {
	if i, ok := slices.BinarySearch(a.Above, seq); !ok {
		a.Above = slices.Insert(a.Above, i, seq)
	}
	if id == "" {
		return
	}
	a.RecentIDs = append(a.RecentIDs, id)
	if n := len(a.RecentIDs); n > keep {
		a.RecentIDs = slices.Clone(a.RecentIDs[n-keep:])
	}
}

// advance raises Next to next and drops the sequences below it.
func (a *Applied) advance(next uint64) {
	if next <= a.Next {
		return
	}
	a.Next = next
	i, _ := slices.BinarySearch(a.Above, next)
	a.Above = slices.Clone(a.Above[i:])
	if len(a.Above) == 0 {
		a.Above = nil
	}
}

// Turn is the open turn. Open means the agent asked for another step (the
// next step is due and steering may join); a turn that is not open is parked
// on an input or authorization wait. Inputs are the admitted commands for
// the next step.
type Turn struct {
	ID     string    `json:"id"`
	Caller string    `json:"caller,omitempty"`
	Steps  int       `json:"steps"` // committed steps
	Open   bool      `json:"open"`
	Inputs []Command `json:"inputs,omitempty"`
	Usage  Usage     `json:"usage,omitzero"` // the turn's steps' usage so far
	// Delegated marks a turn a parent's delivery (CommandID) started: when
	// it settles, its Outputs (message.output texts) and usage return to
	// the parent as child.result.
	CommandID string   `json:"commandId,omitempty"`
	Delegated bool     `json:"delegated,omitempty"`
	Outputs   []string `json:"outputs,omitempty"`
	// Before is what the turn found when it started and Calls the
	// journaled calls its steps made (at most wire.MaxTurnInputs): a
	// rollback restores the one and reports the other.
	Before *Before        `json:"before,omitempty"`
	Calls  []wire.CallRef `json:"calls,omitempty"`
}

// Waits are the session's live waits.
type Waits struct {
	Input *InputWait `json:"input,omitempty"`
	Auth  *AuthWait  `json:"auth,omitempty"`
	Tasks []Task     `json:"tasks,omitempty"`
}

// InputWait is a pending human-input request.
type InputWait struct {
	RequestID string `json:"requestId"`
	Question  string `json:"question,omitempty"`
}

// AuthWait is the current authorization attempt; a new request replaces it.
type AuthWait struct {
	AttemptID string `json:"attemptId"`
}

// Task is a live background task: its kind ("" is "sleep"), its input,
// and a sleep task's duration.
type Task struct {
	ID       string          `json:"id"`
	Duration time.Duration   `json:"duration,omitempty"`
	Kind     string          `json:"kind,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
}

// Timer is the armed session-lifetime timer.
type Timer struct {
	ID       string        `json:"id"`
	Deadline time.Time     `json:"deadline"`
	Duration time.Duration `json:"duration"` // original configured timeout
}

// Writer stamps every commit with the writing run and a counter, so an
// uncertain write can be settled by reading the record back.
type Writer struct {
	RunID string `json:"runId,omitempty"`
	Write uint64 `json:"write"`
}

// Clone returns a deep copy, except for the history: an entry is never
// modified once appended, and the history only ever grows by append or is
// replaced whole, so the copy shares it, clipped to its length — an append
// to either side then never writes where the other one reads. The history
// is long (a session that lives for days), and Clone runs on every
// boundary: copying it cost a delivery tens of microseconds per thousand
// entries, twice on the way to its step. Everything else is copied by hand
// (TestCloneMatchesJSON holds it to a JSON round trip).
func (s *Snapshot) Clone() Snapshot {
	out := *s
	out.Applied.Above = slices.Clone(s.Applied.Above)
	out.Applied.RecentIDs = slices.Clone(s.Applied.RecentIDs)
	out.History = slices.Clip(s.History) // shared: entries are immutable (see Entry)
	out.State = cloneRaw(s.State)
	if s.Turn != nil {
		t := *s.Turn
		t.Inputs = cloneCommands(s.Turn.Inputs)
		t.Outputs = slices.Clone(s.Turn.Outputs)
		t.Calls = slices.Clone(s.Turn.Calls)
		if b := s.Turn.Before; b != nil {
			c := *b // the state is shared: see Before
			t.Before = &c
		}
		out.Turn = &t
	}
	out.Waits = s.Waits.clone()
	if s.Timer != nil {
		t := *s.Timer
		out.Timer = &t
	}
	out.Aliases = slices.Clone(s.Aliases)
	out.Tags = maps.Clone(s.Tags)
	out.Outbox = cloneEvents(s.Outbox)
	out.Handles = slices.Clone(s.Handles)
	out.ChildWaits = slices.Clone(s.ChildWaits)
	if s.Parent != nil {
		p := *s.Parent
		out.Parent = &p
	}
	out.Sends = slices.Clone(s.Sends) // a send's command is never modified once built
	out.PendingSends = slices.Clone(s.PendingSends)
	if w := s.Debounce; w != nil {
		c := *w
		c.Inputs = cloneCommands(w.Inputs)
		out.Debounce = &c
	}
	return out
}

func (w Waits) clone() Waits {
	out := Waits{Tasks: slices.Clone(w.Tasks)}
	for i := range out.Tasks {
		out.Tasks[i].Input = slices.Clone(out.Tasks[i].Input)
	}
	if w.Input != nil {
		in := *w.Input
		out.Input = &in
	}
	if w.Auth != nil {
		a := *w.Auth
		out.Auth = &a
	}
	return out
}

func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return slices.Clone(r)
}

func cloneCommands(cs []Command) []Command {
	if cs == nil {
		return nil
	}
	out := slices.Clone(cs)
	for i := range out {
		out[i].Value = cloneRaw(cs[i].Value)
		if r := cs[i].TextRef; r != nil {
			ref := *r
			out[i].TextRef = &ref
		}
		if r := cs[i].PayloadsRef; r != nil {
			ref := *r
			out[i].PayloadsRef = &ref
		}
		out[i].Payloads = clonePayloads(cs[i].Payloads)
	}
	return out
}

func cloneEvents(es []Event) []Event {
	if es == nil {
		return nil
	}
	out := slices.Clone(es)
	for i := range out {
		out[i].Data = cloneRaw(es[i].Data)
	}
	return out
}
