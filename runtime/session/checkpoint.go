package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// EncodeNew is the first checkpoint of a new session with these aliases
// and tags (nil: none) — the versioned wire checkpoint: wire owns the
// durable shape — for record.New; NewCheckpoint is the same checkpoint for
// Boot. A session with tags is written at the state version that holds
// them (wire.EncodeCheckpoint), one without at the version it always was.
func EncodeNew(sessionID string, aliases []string, tags map[string]string) ([]byte, error) {
	return wire.EncodeCheckpoint(toCheckpoint(sessionID, runtime.Snapshot{Aliases: aliases, Tags: tags}, nil, sealed{}))
}

// NewCheckpoint is a new session's checkpoint, as EncodeNew encodes it.
func NewCheckpoint(aliases []string, tags map[string]string) Checkpoint {
	return Checkpoint{Snap: runtime.Snapshot{Aliases: aliases, Tags: tags}}
}

// toCheckpoint is the wire checkpoint of a snapshot, all content inline.
func toCheckpoint(sessionID string, snap runtime.Snapshot, outbox []wire.Event, segs sealed) wire.Checkpoint {
	cp := wire.Checkpoint{
		HistorySegments: segs.refs, HistoryV: segs.v, Usage: snap.Usage,
		StateV: wire.CurrentStateVersion, SessionID: sessionID,
		State: snap.State, EventSeq: snap.EventSeq, Paused: snap.Paused, Tags: snap.Tags,
		Tokens:  append([]string{sessionID}, snap.Aliases...),
		Applied: wire.Applied{Low: snap.Applied.Next, Above: snap.Applied.Above, IDs: snap.Applied.RecentIDs},
		Outbox:  outbox,
		Started: snap.Started, Ended: snap.Ended,
		Writer:  wire.Writer{RunID: snap.Writer.RunID, Write: snap.Writer.Write},
		Turn:    toWireTurn(snap),
		Waits:   toWireWaits(snap.Waits),
		Handles: snap.Handles, ChildWaits: snap.ChildWaits, Parent: snap.Parent, Sends: snap.Sends, PendingSends: snap.PendingSends,
	}
	cp.History = toWireHistory(snap.History)
	toWireBusy(&cp, snap)
	if t := snap.Timer; t != nil {
		cp.Timeout = t.Duration
		cp.Timer = &wire.Timer{ID: t.ID, Deadline: t.Deadline.UTC(), Duration: t.Duration}
	}
	return cp
}

// DecodeCheckpoint is the inverse: the snapshot, the encoded tokens and the
// outbox as stamped by the run that committed it (a successor re-publishes
// exactly those events). A checkpoint of an unknown state version is refused
// (wire.ErrUnsupportedState) before anything is claimed or run.
// The snapshot's History is only the inline tail; segments are the sealed
// history segments before it (ReadCheckpoint reads them back).
func DecodeCheckpoint(b []byte) (Checkpoint, error) {
	cp, err := wire.DecodeCheckpoint(b)
	if err != nil {
		return Checkpoint{}, err
	}
	snap := runtime.Snapshot{
		Started: cp.Started, Ended: cp.Ended, EventSeq: cp.EventSeq, Paused: cp.Paused, State: cp.State, Tags: cp.Tags,
		Applied: runtime.Applied{Next: cp.Applied.Low, Above: cp.Applied.Above, RecentIDs: cp.Applied.IDs},
		Writer:  runtime.Writer{RunID: cp.Writer.RunID, Write: cp.Writer.Write},
		Turns:   cp.Turn.Count, Turn: fromWireTurn(cp.Turn), Waits: fromWireWaits(cp.Waits),
		Handles: cp.Handles, ChildWaits: cp.ChildWaits, Parent: cp.Parent, Sends: cp.Sends, PendingSends: cp.PendingSends,
	}
	if len(cp.Tokens) > 1 {
		snap.Aliases = cp.Tokens[1:]
	}
	snap.History, snap.Usage = fromWireHistory(cp.History), cp.Usage
	fromWireBusy(&snap, cp)
	for _, e := range cp.Outbox {
		snap.Outbox = append(snap.Outbox, runtime.Event{Seq: e.Seq, Kind: e.Kind, V: dataV(e.V), Data: e.Data})
	}
	if t := cp.Timer; t != nil {
		snap.Timer = &runtime.Timer{ID: t.ID, Deadline: t.Deadline, Duration: t.Duration}
	}
	tokens, err := EncodedTokens(cp.SessionID, snap.Aliases)
	return Checkpoint{Snap: snap, Tokens: tokens, Outbox: cp.Outbox, segments: sealed{cp.HistorySegments, cp.HistoryV},
		stateRef: cp.StateRef, beforeRef: beforeRef(cp), taskRefs: taskRefs(cp.Waits), refs: refsOf(cp)}, err
}

// taskRefs are the out-of-line inputs of a checkpoint's tasks, by task ID.
func taskRefs(w wire.Waits) map[string]wire.BlobRef {
	var refs map[string]wire.BlobRef
	for _, t := range w.Tasks {
		if t.InputRef != nil {
			if refs == nil {
				refs = map[string]wire.BlobRef{}
			}
			refs[t.ID] = *t.InputRef
		}
	}
	return refs
}

// toWireHistory is the history as a checkpoint stores it: each entry in
// the legacy shape when it fits (wire.HistoryEntry.Compact).
func toWireHistory(es []runtime.Entry) []wire.HistoryEntry {
	if len(es) == 0 {
		return nil
	}
	out := make([]wire.HistoryEntry, 0, len(es))
	for _, e := range es {
		out = append(out, e.Wire().Compact())
	}
	return out
}

// fromWireHistory is a stored history with every legacy entry migrated.
func fromWireHistory(hs []wire.HistoryEntry) []runtime.Entry {
	var out []runtime.Entry
	for _, h := range hs {
		out = append(out, runtime.EntryOf(h))
	}
	return out
}

// dataV is the machine's data version of a stored event (0 for 1).
func dataV(v int) int {
	if v > 1 {
		return v
	}
	return 0
}

// Checkpoint is a checkpoint read back. After DecodeCheckpoint alone,
// out-of-line content is not read yet: segments (history), stateRef and
// the turn inputs' TextRef name the blobs ReadCheckpoint reads.
type Checkpoint struct {
	// Snap is the machine's snapshot (its History only the inline tail
	// until ReadCheckpoint).
	Snap runtime.Snapshot
	// Tokens are the encoded address tokens: the stable token first.
	Tokens []string
	// Outbox is the committed outbox as stamped by the run that wrote it
	// (a successor re-publishes exactly those events).
	Outbox   []wire.Event
	segments sealed
	stateRef *wire.BlobRef
	// beforeRef is the live turn's Before state out of line.
	beforeRef *wire.BlobRef
	hist      *history                // the segments as read (ReadCheckpoint)
	taskRefs  map[string]wire.BlobRef // out-of-line task inputs (hydrated by ReadCheckpoint)
	refs      blobRefs                // every blob the checkpoint refers to
}

// ReadCheckpoint decodes a session's checkpoint and reads its out-of-line
// content (history segments, state, input texts) back into the snapshot:
// what an owner must be able to read before it claims the session. An error
// that will recur (it does not decode, content missing or corrupt) matches
// ErrUnbootable.
func ReadCheckpoint(ctx context.Context, env *Env, id string, cp []byte) (Checkpoint, error) {
	d, err := DecodeCheckpoint(cp)
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: session %s checkpoint: %w", ErrUnbootable, id, err)
	}
	d.hist = newHistory(env, id)
	if d.Snap.History, err = d.hist.load(ctx, d.segments, d.Snap.History); err != nil {
		return Checkpoint{}, unbootable(fmt.Errorf("session %s history: %w", id, err))
	}
	if err := env.blobs.hydrate(ctx, id, &d); err != nil {
		return Checkpoint{}, unbootable(err)
	}
	return d, nil
}

// unbootable marks an error reading out-of-line content that will recur:
// the object is gone, does not match its digest, or does not decode. A
// store that did not answer is left as it is (the attempt is not counted).
func unbootable(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	if errors.Is(err, ErrBlobNotFound) || errors.Is(err, wire.ErrDigestMismatch) ||
		errors.As(err, &syntax) || errors.As(err, &typ) {
		return fmt.Errorf("%w: %w", ErrUnbootable, err)
	}
	return err
}

// SetFloor raises the snapshot's event seq to the record's floor: events
// appended outside a commit (session.quarantined, session.retried) follow
// the checkpoint's.
func (c *Checkpoint) SetFloor(rec record.SessionRecord) {
	c.Snap.EventSeq = rec.EventSeq(c.Snap.EventSeq)
}

func toWireTurn(snap runtime.Snapshot) wire.TurnState {
	ts := wire.TurnState{Count: snap.Turns}
	if t := snap.Turn; t != nil {
		ts.ID, ts.Caller, ts.Step, ts.Open, ts.Live, ts.Usage = t.ID, t.Caller, uint64(t.Steps), t.Open, true, t.Usage
		ts.CommandID, ts.Delegated, ts.Outputs = t.CommandID, t.Delegated, t.Outputs
		for _, in := range t.Inputs { // a copy: blobStore.externalise edits the checkpoint's
			ts.Inputs = append(ts.Inputs, wire.CompactInput(in))
		}
	}
	return ts
}

func fromWireTurn(ts wire.TurnState) *runtime.Turn {
	if !ts.Live {
		return nil
	}
	t := &runtime.Turn{ID: ts.ID, Caller: ts.Caller, Steps: int(ts.Step), Open: ts.Open, Usage: ts.Usage,
		CommandID: ts.CommandID, Delegated: ts.Delegated, Outputs: ts.Outputs}
	for _, in := range ts.Inputs {
		t.Inputs = append(t.Inputs, wire.ExpandInput(in)) // one with content out of line: after hydrate
	}
	return t
}

func toWireWaits(w runtime.Waits) wire.Waits {
	var out wire.Waits
	if w.Input != nil {
		out.Input = &wire.InputWait{RequestID: w.Input.RequestID, Question: w.Input.Question}
	}
	if w.Auth != nil {
		out.Auth = &wire.AuthWait{AttemptID: w.Auth.AttemptID}
	}
	for _, t := range w.Tasks {
		out.Tasks = append(out.Tasks, wire.TaskWait{ID: t.ID, Duration: t.Duration, Kind: t.Kind, Input: t.Input})
	}
	return out
}

func fromWireWaits(w wire.Waits) runtime.Waits {
	var out runtime.Waits
	if w.Input != nil {
		out.Input = &runtime.InputWait{RequestID: w.Input.RequestID, Question: w.Input.Question}
	}
	if w.Auth != nil {
		out.Auth = &runtime.AuthWait{AttemptID: w.Auth.AttemptID}
	}
	for _, t := range w.Tasks {
		// A task of an older checkpoint has no kind: it is a sleep.
		out.Tasks = append(out.Tasks, runtime.Task{ID: t.ID, Duration: t.Duration, Kind: t.KindOf(), Input: t.Input})
	}
	return out
}

// CheckHandles is a handoff candidate's check of the child handles it
// would carry: settled (no handle active, no descendant wait: the idle
// predicate let the handoff start) and each one naming the child its
// parent, name and generation derive, so the successor continues every
// parked child at its stable address.
func CheckHandles(id string, snap runtime.Snapshot) error {
	if len(snap.ChildWaits) > 0 {
		return fmt.Errorf("session %s: %d descendant waits outstanding: not settled", id, len(snap.ChildWaits))
	}
	for _, h := range snap.Handles {
		if h.State == wire.HandleActive {
			return fmt.Errorf("session %s: handle %q is active: not settled", id, h.Handle)
		}
		if want := wire.ChildSessionID(id, h.Handle, h.Generation); h.ChildSessionID != want {
			return fmt.Errorf("session %s: handle %q generation %d names child %s, not %s", id, h.Handle, h.Generation, h.ChildSessionID, want)
		}
	}
	return nil
}
