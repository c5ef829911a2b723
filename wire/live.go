package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Live events: a step's partial output while it runs. They are not
// durable and not session events: an owner publishes them on core NATS on
// the session's live subject (baton.live.<sessionID>), nothing stores or
// acknowledges them, and the ingress forwards them to SSE clients as they
// are. They carry no seq (and SSE sends them without an id: line), so a
// live event is never a resume cursor. The message is one LiveEvent in
// JSON, exactly the SSE data line:
//
//	{"sessionId":"…","kind":"message.delta","time":"…","deploymentId":"v1","data":{"turnId":"t3","step":1,"text":"The "}}
//	{"sessionId":"…","kind":"message.discarded","time":"…","deploymentId":"v1","data":{"turnId":"t3","step":1}}
//
// Compatibility: a reader ignores a live event of a kind it does not know
// (a newer owner's), and unknown data members; the two shapes only grow.
const (
	// EventMessageDelta is a piece of a running step's output text.
	EventMessageDelta = "message.delta"
	// EventMessageDiscarded says that the deltas of (turnId, step) will
	// never be committed: the step failed, was cancelled, timed out, or is
	// about to run again after a crash. A UI drops them.
	EventMessageDiscarded = "message.discarded"
	// EventTaskProgress is a running background task's progress note
	// (runtime.TaskRun.Progress).
	EventTaskProgress = "task.progress"
)

// MaxLiveTextBytes bounds the text of one message.delta; a driver splits a
// longer delta (at a rune boundary).
const MaxLiveTextBytes = 16 << 10

// LiveEvent is the envelope of a live event.
type LiveEvent struct {
	SessionID    string          `json:"sessionId"`
	Kind         string          `json:"kind"`
	Time         time.Time       `json:"time"`
	DeploymentID string          `json:"deploymentId"`
	Data         json.RawMessage `json:"data"`
}

// MessageDelta is the data of a message.delta.
type MessageDelta struct {
	TurnID string `json:"turnId"`
	Step   uint64 `json:"step"`
	Text   string `json:"text"`
}

// MessageDiscarded is the data of a message.discarded.
type MessageDiscarded struct {
	TurnID string `json:"turnId"`
	Step   uint64 `json:"step"`
}

// TaskProgress is the data of a task.progress.
type TaskProgress struct {
	TaskID string `json:"taskId"`
	Note   string `json:"note"`
}

// MaxProgressNoteBytes bounds a task.progress note.
const MaxProgressNoteBytes = 4 << 10

// EncodeLive builds the message of a live event; body is a MessageDelta,
// a MessageDiscarded or a TaskProgress.
func EncodeLive(sessionID, deploymentID string, at time.Time, body any) ([]byte, error) {
	var kind string
	switch body.(type) {
	case MessageDelta, *MessageDelta:
		kind = EventMessageDelta
	case MessageDiscarded, *MessageDiscarded:
		kind = EventMessageDiscarded
	case TaskProgress, *TaskProgress:
		kind = EventTaskProgress
	default:
		return nil, fmt.Errorf("%w: live event body %T", ErrInvalid, body)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return json.Marshal(LiveEvent{SessionID: sessionID, Kind: kind, Time: at.UTC(), DeploymentID: deploymentID, Data: data})
}

// Live is a decoded live event: its envelope and the step (or, for
// task.progress, the task) it is about.
type Live struct {
	LiveEvent
	TurnID string
	Step   uint64
	TaskID string
}

// DecodeLive decodes and checks a live event's message: a known kind,
// a session ID, a turn and a step ≥ 1, and for a delta a UTF-8 text of at
// most MaxLiveTextBytes. A live event of an unknown kind is ErrUnknownKind
// (a reader skips it).
func DecodeLive(data []byte) (Live, error) {
	var ev LiveEvent
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&ev); err != nil {
		return Live{}, fmt.Errorf("%w: live event: %v", ErrInvalid, err)
	}
	if ev.SessionID == "" || len(ev.Data) == 0 {
		return Live{}, fmt.Errorf("%w: live event without sessionId or data", ErrInvalid)
	}
	l := Live{LiveEvent: ev}
	switch ev.Kind {
	case EventMessageDelta:
		var d MessageDelta
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return Live{}, fmt.Errorf("%w: message.delta data: %v", ErrInvalid, err)
		}
		if len(d.Text) > MaxLiveTextBytes || !utf8.ValidString(d.Text) {
			return Live{}, fmt.Errorf("%w: message.delta text: over %d bytes or not UTF-8", ErrInvalid, MaxLiveTextBytes)
		}
		l.TurnID, l.Step = d.TurnID, d.Step
	case EventMessageDiscarded:
		var d MessageDiscarded
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return Live{}, fmt.Errorf("%w: message.discarded data: %v", ErrInvalid, err)
		}
		l.TurnID, l.Step = d.TurnID, d.Step
	case EventTaskProgress:
		var d TaskProgress
		if err := json.Unmarshal(ev.Data, &d); err != nil || d.TaskID == "" || len(d.Note) > MaxProgressNoteBytes || !utf8.ValidString(d.Note) {
			return Live{}, fmt.Errorf("%w: task.progress data: want a taskId and a UTF-8 note of at most %d bytes", ErrInvalid, MaxProgressNoteBytes)
		}
		l.TaskID = d.TaskID
		return l, nil
	default:
		return Live{}, fmt.Errorf("%w: live event kind %q", ErrUnknownKind, ev.Kind)
	}
	if l.TurnID == "" || l.Step == 0 {
		return Live{}, fmt.Errorf("%w: %s without turnId or step", ErrInvalid, ev.Kind)
	}
	return l, nil
}
