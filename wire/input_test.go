package wire

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeInput: every frozen v1 fixture decodes to the owner's view the
// machine processes, field by field as the driver's conversion always made
// it (before the machine took TurnInput itself).
func TestDecodeInput(t *testing.T) {
	const id, dep = "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0C", "dep-2026-03-01"
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	want := map[string]TurnInput{
		"auth.callback":     {Kind: KindAuthCallback, AttemptID: "att-3", AuthResult: "granted", Value: raw(`{"scope":"calendar.read"}`)},
		"cancel":            {Kind: KindCancel},
		"clear":             {Kind: KindClear},
		"compact":           {Kind: KindCompact},
		"deliver-steer":     {ID: "01JNV8Y6Q3ZK4W5X6Y7Z8A9B0D", Kind: KindDeliver, Mode: ModeSteer, Text: "Also check Porto."},
		"deliver":           {Kind: KindDeliver, Mode: ModeQueue, Caller: "slack:U42", Text: "What's the weather in Lisbon?"},
		"input.response":    {Kind: KindInputResponse, RequestID: "req-7", Value: raw(`"yes"`)},
		"move":              {Kind: KindMove, Caller: "admin:ops", Target: "dep-2026-03-02", Force: true},
		"pause":             {Kind: KindPause},
		"reset":             {Kind: KindReset},
		"resume":            {Kind: KindResume},
		"task.result-error": {Kind: KindTaskResult, TaskID: "task-10", TaskError: "upstream timed out"},
		"task.result":       {Kind: KindTaskResult, TaskID: "task-9", Value: raw(`{"rows":3}`)},
		"timeout":           {Kind: KindTimeout, TimerID: "timer-01JNV8"},
	}
	for _, path := range fixtures(t, 1) {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: no expected input", name)
			continue
		}
		w.Seq, w.Deployment, w.ID = 7, dep, or(w.ID, id)
		got := DecodeInput(7, readFile(t, path))
		if c, _ := Decode(readFile(t, path)); c.Deliver != nil && !reflect.DeepEqual(got.Payloads, c.Deliver.Payloads) {
			t.Errorf("%s: payloads %+v, sent %+v", name, got.Payloads, c.Deliver.Payloads)
		}
		// A checkpoint stores it compacted; expanded again it is the same.
		if back := ExpandInput(CompactInput(got)); !reflect.DeepEqual(back, got) {
			t.Errorf("%s: compacted and expanded\n got %+v\nwant %+v", name, back, got)
		}
		got.Payloads = nil
		if !reflect.DeepEqual(got, w) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, w)
		}
	}
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestRejectedInput: an undecodable payload is identified by the command
// ID its error names, else by its sequence, and carries the error.
func TestRejectedInput(t *testing.T) {
	newer := []byte(`{"v":99,"kind":"deliver","id":"c-new"}`)
	got := DecodeInput(12, newer)
	_, err := Decode(newer)
	if want := (TurnInput{Seq: 12, ID: "c-new", Kind: KindDeliver, Rejected: err.Error()}); !reflect.DeepEqual(got, want) {
		t.Fatalf("newer version:\n got %+v\nwant %+v", got, want)
	}
	got = RejectedInput(13, errors.New("not JSON"))
	if want := (TurnInput{Seq: 13, ID: "rejected-13", Kind: KindDeliver, Rejected: "not JSON"}); !reflect.DeepEqual(got, want) {
		t.Fatalf("anonymous:\n got %+v\nwant %+v", got, want)
	}
	if got := DecodeInput(14, []byte(`{`)); got.ID != "rejected-14" || got.Rejected == "" {
		t.Fatalf("garbage: %+v", got)
	}
}
