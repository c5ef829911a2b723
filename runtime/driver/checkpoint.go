package driver

import (
	"slices"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// encodeCheckpoint maps the machine's snapshot onto the versioned wire
// checkpoint (wire owns the durable shape) and encodes it; everything must
// fit inline (a new session's first checkpoint). tokens[0] is the stable
// token; the raw addresses are the session ID plus the snapshot's aliases.
func encodeCheckpoint(sessionID string, tokens []string, snap runtime.Snapshot, outbox []wire.Event, segs []wire.BlobRef) ([]byte, error) {
	return wire.EncodeCheckpoint(toCheckpoint(sessionID, snap, outbox, segs))
}

// toCheckpoint is the wire checkpoint of a snapshot, all content inline.
func toCheckpoint(sessionID string, snap runtime.Snapshot, outbox []wire.Event, segs []wire.BlobRef) wire.Checkpoint {
	cp := wire.Checkpoint{
		HistorySegments: segs,
		StateV:          wire.CurrentStateVersion, SessionID: sessionID,
		State: snap.State, EventSeq: snap.EventSeq, Paused: snap.Paused,
		Tokens:  append([]string{sessionID}, snap.Aliases...),
		Applied: wire.Applied{Low: snap.Applied.Next, Above: snap.Applied.Above, IDs: snap.Applied.RecentIDs},
		Outbox:  outbox,
		Started: snap.Started, Ended: snap.Ended,
		Writer: wire.Writer{RunID: snap.Writer.RunID, Write: snap.Writer.Write},
		Turn:   toWireTurn(snap),
		Waits:  toWireWaits(snap.Waits),
	}
	for _, h := range snap.History {
		cp.History = append(cp.History, wire.HistoryEntry{Role: h.Role, Text: h.Text})
	}
	if t := snap.Timer; t != nil {
		cp.Timeout = t.Duration
		cp.Timer = &wire.Timer{ID: t.ID, Deadline: t.Deadline.UTC(), Duration: t.Duration}
	}
	return cp
}

// decodeCheckpoint is the inverse: the snapshot, the encoded tokens and the
// outbox as stamped by the run that committed it (a successor re-publishes
// exactly those events). A checkpoint of an unknown state version is refused
// (wire.ErrUnsupportedState) before anything is claimed or run.
// The snapshot's History is only the inline tail; segments are the sealed
// history segments before it (history.load reads them).
func decodeCheckpoint(b []byte) (decoded, error) {
	cp, err := wire.DecodeCheckpoint(b)
	if err != nil {
		return decoded{}, err
	}
	snap := runtime.Snapshot{
		Started: cp.Started, Ended: cp.Ended, EventSeq: cp.EventSeq, Paused: cp.Paused, State: cp.State,
		Applied: runtime.Applied{Next: cp.Applied.Low, Above: cp.Applied.Above, RecentIDs: cp.Applied.IDs},
		Writer:  runtime.Writer{RunID: cp.Writer.RunID, Write: cp.Writer.Write},
		Turns:   cp.Turn.Count, Turn: fromWireTurn(cp.Turn), Waits: fromWireWaits(cp.Waits),
	}
	if len(cp.Tokens) > 1 {
		snap.Aliases = cp.Tokens[1:]
	}
	for _, h := range cp.History {
		snap.History = append(snap.History, runtime.Entry{Role: h.Role, Text: h.Text})
	}
	for _, e := range cp.Outbox {
		snap.Outbox = append(snap.Outbox, runtime.Event{Seq: e.Seq, Kind: e.Kind, Data: e.Data})
	}
	if t := cp.Timer; t != nil {
		snap.Timer = &runtime.Timer{ID: t.ID, Deadline: t.Deadline, Duration: t.Duration}
	}
	tokens, err := encodedTokens(cp.SessionID, snap.Aliases)
	return decoded{snap: snap, tokens: tokens, outbox: cp.Outbox, segments: cp.HistorySegments, stateRef: cp.StateRef}, err
}

// decoded is a checkpoint read back. Out-of-line content is not read yet:
// segments (history), stateRef and the turn inputs' TextRef name the blobs
// Owner.hydrate reads.
type decoded struct {
	snap     runtime.Snapshot
	tokens   []string
	outbox   []wire.Event
	segments []wire.BlobRef
	stateRef *wire.BlobRef
}

func toWireTurn(snap runtime.Snapshot) wire.TurnState {
	ts := wire.TurnState{Count: snap.Turns}
	if t := snap.Turn; t != nil {
		ts.ID, ts.Caller, ts.Step, ts.Open, ts.Live = t.ID, t.Caller, uint64(t.Steps), t.Open, true
		ts.Inputs = slices.Clone(t.Inputs) // blobs.externalise edits the checkpoint's copy
	}
	return ts
}

func fromWireTurn(ts wire.TurnState) *runtime.Turn {
	if !ts.Live {
		return nil
	}
	return &runtime.Turn{ID: ts.ID, Caller: ts.Caller, Steps: int(ts.Step), Open: ts.Open, Inputs: ts.Inputs}
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
		out.Tasks = append(out.Tasks, wire.TaskWait{ID: t.ID, Duration: t.Duration})
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
		out.Tasks = append(out.Tasks, runtime.Task{ID: t.ID, Duration: t.Duration})
	}
	return out
}
