package record

import (
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/baton-rt/baton/wire"
)

// The kinds of a session's waits (IndexEntry.WaitingFor, the status's
// waitingFor). The first four are durable — recorded by a commit, kept in
// the session index — the others are read from the record when asked.
const (
	WaitInput         = "input"         // a human-input request (requestId, question)
	WaitAuthorization = "authorization" // an authorization callback (attemptId)
	WaitTask          = "task"          // a live background task (taskId, taskKind)
	WaitChild         = "child"         // a child session: an active handle, or a descendant's wait (sessionId)
	WaitPaused        = "paused"        // paused by an operator
	WaitQuarantined   = "quarantined"   // quarantined: no owner runs it
	WaitHandoff       = "handoff"       // mid-handoff
	WaitStep          = "step"          // a turn is live: a step is due or running
	WaitDebounce      = "debounce"      // an open debounce window (until)
)

// DurableWaitKinds are the wait kinds the session index keeps, in the
// order a session's waits are listed.
var DurableWaitKinds = []string{WaitInput, WaitAuthorization, WaitTask, WaitChild}

// MaxIndexedQuestion bounds the bytes of an input wait's question the
// session index keeps (the status shows it whole).
const MaxIndexedQuestion = 256

// Wait is one thing a session waits for. Kind says which members are set.
type Wait struct {
	Kind      string `json:"kind"`
	RequestID string `json:"requestId,omitempty"`
	Question  string `json:"question,omitempty"`
	AttemptID string `json:"attemptId,omitempty"`
	TaskID    string `json:"taskId,omitempty"`
	TaskKind  string `json:"taskKind,omitempty"`
	SessionID string `json:"sessionId,omitempty"`
	// Until is when an open debounce window closes (kind debounce).
	Until *time.Time `json:"until,omitempty"`
}

// IndexEntry is a session's entry in the session index: what a listing
// filters and shows without reading the session record. It is derived —
// from the record at Revision and its checkpoint — and never decides
// anything: an entry with a higher Revision always wins, so a late write
// of an old owner (or of a reconciler that read an older record) never
// overwrites a newer one.
type IndexEntry struct {
	SessionID       string            `json:"sessionId"`
	Agent           string            `json:"agent,omitempty"`
	DeploymentID    string            `json:"deploymentId"`
	State           State             `json:"state"`
	OwnerProcess    string            `json:"ownerProcess,omitempty"`
	Tags            map[string]string `json:"tags,omitempty"`
	Aliases         []string          `json:"aliases,omitempty"`
	ParentSessionID string            `json:"parentSessionId,omitempty"`
	// CreatedAt is the time of the session's session.started event (zero
	// before its first commit is known: the writer keeps the stored one).
	CreatedAt  time.Time `json:"createdAt"`
	WaitingFor []Wait    `json:"waitingFor,omitempty"`
	// Epoch and Revision are the session record's epoch and KV revision
	// the entry derives from.
	Epoch    uint64 `json:"epoch"`
	Revision uint64 `json:"recordRevision"`
	// Writer names who wrote the entry: owner-<process>,
	// reconcile-<process> or rebuild-<rebuildId>.
	Writer    string    `json:"writer,omitempty"`
	IndexedAt time.Time `json:"indexedAt,omitzero"`
	// Storage is what the session keeps in the streams and the object
	// store, a hint: owners add what they append, the reconciler
	// recounts. Nil until counted.
	Storage *Storage `json:"storage,omitempty"`
	// Grew is a writer's news of the session's storage since its last
	// write (not stored): Storage is the stored one plus Grew. A writer
	// that sets Storage instead (a recount) replaces it.
	Grew *Storage `json:"-"`
}

// Storage is what one session keeps: its events (how many, and their
// bytes on the stream) and its blobs' bytes in the object store.
type Storage struct {
	Events     uint64 `json:"events"`
	EventBytes int64  `json:"eventBytes"`
	BlobBytes  int64  `json:"blobBytes"`
}

// Plus is s with the events and bytes of g added; g.Events, when set, is
// the new event count (a writer knows its last event's seq).
func (s Storage) Plus(g Storage) Storage {
	if g.Events > s.Events {
		s.Events = g.Events
	}
	s.EventBytes += g.EventBytes
	s.BlobBytes = max(s.BlobBytes+g.BlobBytes, 0)
	return s
}

// DeriveIndex is the index entry of the session record rec (at revision
// rev) whose decoded checkpoint is cp, for a deployment of agent. Its
// CreatedAt is left zero.
func DeriveIndex(rec SessionRecord, rev uint64, cp wire.Checkpoint, agent string) IndexEntry {
	e := IndexEntry{SessionID: rec.SessionID, Agent: agent, DeploymentID: rec.DeploymentID, State: rec.State,
		OwnerProcess: rec.OwnerProcess, Epoch: rec.Epoch, Revision: rev, WaitingFor: DurableWaits(cp), Tags: maps.Clone(cp.Tags)}
	if len(cp.Tokens) > 1 {
		e.Aliases = slices.Clone(cp.Tokens[1:])
	}
	if cp.Parent != nil {
		e.ParentSessionID = cp.Parent.SessionID
	}
	return e
}

// DurableWaits are the waits a checkpoint records: its input request, its
// authorization attempt, its live tasks, then its children — the child
// session of each active handle, then of each descendant's outstanding
// wait, each once.
func DurableWaits(cp wire.Checkpoint) []Wait {
	var out []Wait
	if in := cp.Waits.Input; in != nil {
		out = append(out, Wait{Kind: WaitInput, RequestID: in.RequestID, Question: clipUTF8(in.Question, MaxIndexedQuestion)})
	}
	if a := cp.Waits.Auth; a != nil {
		out = append(out, Wait{Kind: WaitAuthorization, AttemptID: a.AttemptID})
	}
	for _, t := range cp.Waits.Tasks {
		out = append(out, Wait{Kind: WaitTask, TaskID: t.ID, TaskKind: t.KindOf()})
	}
	seen := map[string]bool{}
	child := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			out = append(out, Wait{Kind: WaitChild, SessionID: id})
		}
	}
	for _, h := range cp.Handles {
		if h.State == wire.HandleActive {
			child(h.ChildSessionID)
		}
	}
	for _, w := range cp.ChildWaits {
		child(w.ChildSessionID)
	}
	return out
}

// WaitingFor is every wait of a stored session: a quarantined or
// mid-handoff record says only that; otherwise paused (an operator's
// pause), the checkpoint's durable waits (question whole), then step when
// a turn is live without a durable wait of its own keeping it (its step
// is due or running). Empty when the session is idle or ended (the inbox
// is not read: a queued command is not a wait).
func WaitingFor(rec SessionRecord, cp wire.Checkpoint) []Wait {
	switch rec.State {
	case StateEnded:
		return []Wait{}
	case StateQuarantined:
		return []Wait{{Kind: WaitQuarantined}}
	case StateHandoff:
		return []Wait{{Kind: WaitHandoff}}
	}
	out := []Wait{}
	if rec.State == StatePaused || cp.Paused {
		out = append(out, Wait{Kind: WaitPaused})
	}
	durable := DurableWaits(cp)
	if in := cp.Waits.Input; in != nil && len(durable) > 0 {
		durable[0].Question = in.Question
	}
	out = append(out, durable...)
	if w := cp.Debounce; w != nil {
		until := w.Until
		out = append(out, Wait{Kind: WaitDebounce, Until: &until})
	}
	if cp.Turn.Live && (cp.Turn.Open || cp.Waits.Input == nil && cp.Waits.Auth == nil && len(cp.Waits.Tasks) == 0 && cp.ActiveChildren() == 0) {
		out = append(out, Wait{Kind: WaitStep})
	}
	return out
}

// Activity is what the entry knows of the idle rule's conditions: its
// state and durable waits (not a live turn or a queued command, which only
// the record and the inbox tell).
func (e IndexEntry) Activity() Activity {
	a := Activity{State: e.State, Input: e.Waiting(WaitInput), Auth: e.Waiting(WaitAuthorization)}
	for _, w := range e.WaitingFor {
		switch w.Kind {
		case WaitTask:
			a.Tasks++
		case WaitChild:
			a.Children++
		}
	}
	return a
}

// Waiting reports whether the entry waits for kind ("any": for any
// durable wait).
func (e IndexEntry) Waiting(kind string) bool {
	if kind == "any" {
		return len(e.WaitingFor) > 0
	}
	return slices.ContainsFunc(e.WaitingFor, func(w Wait) bool { return w.Kind == kind })
}

// Same reports whether e and o index the same facts (their revision,
// epoch, writer and times aside): a writer with nothing new to say skips
// the write.
func (e IndexEntry) Same(o IndexEntry) bool {
	return e.SessionID == o.SessionID && e.Agent == o.Agent && e.DeploymentID == o.DeploymentID &&
		e.State == o.State && e.OwnerProcess == o.OwnerProcess && maps.Equal(e.Tags, o.Tags) && slices.Equal(e.Aliases, o.Aliases) &&
		e.ParentSessionID == o.ParentSessionID && slices.Equal(e.WaitingFor, o.WaitingFor) && e.Epoch == o.Epoch
}

// clipUTF8 cuts s to at most n bytes on a rune boundary.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
