package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

func fullCheckpoint() Checkpoint {
	e1 := envelope(EventCommandApplied, CommandApplied{CommandID: "c1", Seq: 40, Kind: "deliver"})
	e1.SessionID, e1.Seq = "sess-1", 11
	e2 := envelope(EventTurnCompleted, TurnCompleted{TurnID: "t3"})
	e2.SessionID, e2.Seq = "sess-1", 12
	return Checkpoint{
		SessionID:    "sess-1",
		History:      []HistoryEntry{{Role: "user", Text: "hi"}, {Role: "assistant", Text: "hello", Data: json.RawMessage(`{ "tokens": 5 }`)}},
		State:        json.RawMessage(`{"counter": 3}`),
		Initiator:    Initiator{Caller: "slack:U42", DeploymentID: "dep-1", Auth: json.RawMessage(`{"user":"u42"}`)},
		OutputSchema: json.RawMessage(`{"type":"object"}`),
		Compaction:   Compaction{Count: 1, DroppedEntries: 20},
		EventSeq:     12,
		Limits:       map[string]int64{"turns": 97},
		Tokens:       []string{"sess-1", "C123.456"},
		Timeout:      24 * time.Hour,
		Timer:        &Timer{ID: "timer-1", Deadline: time.Date(2026, 3, 2, 12, 0, 0, 0, time.FixedZone("x", 7200))},
		Applied:      Applied{Low: 41, Above: []uint64{45}, IDs: []string{"c0", "c1"}},
		Outbox:       []Event{e1, e2},
		Waits:        Waits{Input: &InputWait{RequestID: "r1"}},
		Turn:         TurnState{Count: 3},
	}
}

// The frozen checkpoint fixture of every state version keeps decoding and
// re-encodes to the same bytes, at its own version (the lowest that
// expresses its content).
func TestCheckpointFixture(t *testing.T) {
	for v := MinStateVersion; v <= CurrentStateVersion; v++ {
		raw := readFile(t, fmt.Sprintf("testdata/checkpoint/state_v%d.json", v))
		c, err := DecodeCheckpoint(raw)
		if err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if c.StateV != v {
			t.Errorf("v%d fixture decoded as stateV %d", v, c.StateV)
		}
		out, err := EncodeCheckpoint(c)
		if err != nil {
			t.Fatal(err)
		}
		if want := bytes.TrimRight(raw, "\n"); !bytes.Equal(out, want) {
			t.Fatalf("v%d not byte-frozen:\n got %s\nwant %s", v, out, want)
		}
	}
}

// The bump to state version 2: a checkpoint is written at version 2 only
// when it holds out-of-line content; otherwise at version 1, in a shape
// that matches version 1's frozen schema (so an owner that reads only
// version 1 can take it after a rollback). Version 1 with a reference
// that version 1 readers would ignore is refused.
func TestCheckpointLowestVersion(t *testing.T) {
	ref := NewBlobRef([]byte("content"))
	for _, tt := range []struct {
		name   string
		change func(*Checkpoint)
		want   int
	}{
		{"plain", func(*Checkpoint) {}, 1},
		{"state ref", func(c *Checkpoint) { c.State, c.StateRef = nil, &ref }, 2},
		{"input text ref", func(c *Checkpoint) {
			c.Turn = TurnState{Count: 3, Live: true, ID: "t3", Open: true, Inputs: []TurnInput{{Seq: 40, ID: "c1", Kind: "deliver", TextRef: &ref}}}
		}, 2},
		{"plain-text delivery kept as text", func(c *Checkpoint) {
			in := CompactInput(TurnInput{Seq: 40, ID: "c1", Kind: "deliver", Text: "hi", Payloads: []Payload{{Message: TextMessage("hi")}}})
			c.Turn = TurnState{Count: 3, Live: true, ID: "t3", Open: true, Inputs: []TurnInput{in}}
		}, 1},
		{"migrated history compacted back", func(c *Checkpoint) {
			for i := range c.History {
				c.History[i] = c.History[i].Migrate().Compact()
			}
		}, 1},
		{"structured entry", func(c *Checkpoint) {
			c.History = append(c.History, HistoryEntry{Role: RoleTool, ToolCallID: "call-1", Content: []Part{{Type: PartText, Text: "18"}}})
		}, 3},
		{"structured segment", func(c *Checkpoint) { c.HistorySegments, c.HistoryV = []BlobRef{ref}, 3 }, 3},
		{"usage", func(c *Checkpoint) { c.Usage = Usage{OutputTokens: 1} }, 3},
		{"sleep task", func(c *Checkpoint) { c.Waits.Tasks = []TaskWait{{ID: "k1", Kind: TaskSleep, Duration: time.Second}} }, 1},
		{"task kind", func(c *Checkpoint) { c.Waits.Tasks = []TaskWait{{ID: "k1", Kind: "fetch"}} }, 4},
		{"task input", func(c *Checkpoint) {
			c.Waits.Tasks = []TaskWait{{ID: "k1", Kind: TaskSleep, Input: json.RawMessage(`{"url":"x"}`)}}
		}, 4},
		{"task input ref", func(c *Checkpoint) {
			c.Waits.Tasks = []TaskWait{{ID: "k1", Kind: "fetch", InputRef: &ref}}
		}, 4},
		{"payloads", func(c *Checkpoint) {
			in := CompactInput(TurnInput{Seq: 40, ID: "c1", Kind: "deliver", Text: "hi", Payloads: []Payload{{Message: TextMessage("hi"), Context: []string{"c"}}}})
			c.Turn = TurnState{Count: 3, Live: true, ID: "t3", Open: true, Inputs: []TurnInput{in}}
		}, 3},
		{"no handles (empty)", func(c *Checkpoint) {
			c.Handles, c.ChildWaits, c.Sends, c.Turn.Outputs = []HandleState{}, []ChildWait{}, []Send{}, []string{}
		}, 1},
		{"handles", func(c *Checkpoint) { c.Handles = fullCheckpointV5().Handles[1:] }, 5},
		{"child waits", func(c *Checkpoint) { c.ChildWaits = fullCheckpointV5().ChildWaits }, 5},
		{"parent", func(c *Checkpoint) { c.Parent = fullCheckpointV5().Parent }, 5},
		{"sends", func(c *Checkpoint) { c.Sends = fullCheckpointV5().Sends }, 5},
		{"delegated turn", func(c *Checkpoint) { c.Turn.Delegated = true }, 5},
		{"turn outputs", func(c *Checkpoint) { c.Turn.Outputs = []string{"partial"} }, 5},
		{"input from a parent", func(c *Checkpoint) {
			c.Turn = TurnState{Count: 3, Live: true, ID: "t3", Open: true, Inputs: fullCheckpointV5().Turn.Inputs[1:]}
		}, 5},
		{"child input", func(c *Checkpoint) {
			c.Turn = TurnState{Count: 3, Live: true, ID: "t3", Open: true, Inputs: fullCheckpointV5().Turn.Inputs[:1]}
		}, 5},
	} {
		c := fullCheckpoint()
		tt.change(&c)
		b, err := EncodeCheckpoint(c)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if v, _ := ReadStateVersion(b); v != tt.want {
			t.Errorf("%s: written at state version %d, want %d", tt.name, v, tt.want)
		}
		if err := debugCheck(checkpointContract(tt.want), b); err != nil {
			t.Errorf("%s: does not match the frozen schema of version %d: %v", tt.name, tt.want, err)
		}
		if tt.want == 5 {
			old := strings.Replace(string(b), `"stateV":5`, `"stateV":4`, 1)
			if _, err := DecodeCheckpoint([]byte(old)); err == nil {
				t.Errorf("%s: version 4 with version 5 content decoded", tt.name)
			}
		}
		if tt.want == 4 {
			old := strings.Replace(string(b), `"stateV":4`, `"stateV":3`, 1)
			if _, err := DecodeCheckpoint([]byte(old)); err == nil {
				t.Errorf("%s: version 3 with version 4 content decoded", tt.name)
			}
		}
		if tt.want == 3 {
			old := strings.Replace(string(b), `"stateV":3`, `"stateV":2`, 1)
			if _, err := DecodeCheckpoint([]byte(old)); err == nil {
				t.Errorf("%s: version 2 with version 3 content decoded", tt.name)
			}
		}
		if tt.want == 2 {
			old := strings.Replace(string(b), `"stateV":2`, `"stateV":1`, 1)
			if _, err := DecodeCheckpoint([]byte(old)); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: version 1 with a reference decoded: %v", tt.name, err)
			}
		}
	}
}

// fullCheckpointV3 uses everything state version 3 added: structured
// history entries (a tool call, its result, an image) beside a legacy one,
// a structured sealed segment, usage, and an admitted delivery's payloads.
func fullCheckpointV3() Checkpoint {
	c := fullCheckpoint()
	c.History = []HistoryEntry{
		{Role: "user", Text: "hi"},
		{Role: RoleAssistant, Content: []Part{{Type: PartText, Text: "let me look"}},
			ToolCalls: []ToolCall{{ID: "call-1", Name: "weather", Arguments: json.RawMessage(`{"city":"Lisbon"}`)}}},
		{Role: RoleTool, ToolCallID: "call-1", Content: []Part{{Type: PartText, Text: "18°C"}}, IsError: true},
		{Role: RoleUser, Content: []Part{{Type: PartImage, URL: "https://example.com/a.png", MediaType: "image/png"}}},
		{Role: RoleUser, Kind: EntryInputResponse, Content: []Part{{Type: PartText, Text: `"yes"`}, {Type: PartText, Text: "and more"}}},
	}
	c.HistorySegments, c.HistoryV = []BlobRef{NewBlobRef([]byte("segment"))}, 3
	c.Usage = Usage{InputTokens: 120, OutputTokens: 30, CachedTokens: 100, CostUSD: 0.0042}
	c.Waits = Waits{}
	c.Turn = TurnState{Count: 3, Live: true, ID: "t3", Open: true, Step: 1, Usage: Usage{InputTokens: 20, OutputTokens: 5},
		Inputs: []TurnInput{{Seq: 46, ID: "c2", Kind: KindDeliver, Mode: ModeSteer, Payloads: []Payload{{
			Message: &Message{Parts: []Part{{Type: PartText, Text: "and this"},
				{Type: PartFile, URL: "https://example.com/r.pdf", MediaType: "application/pdf", Name: "r.pdf"}}},
			Context: []string{"channel: #ops"}, OutputSchema: json.RawMessage(`{"type":"object"}`),
			Ext: map[string]json.RawMessage{"slack": json.RawMessage(`{"ts":"1.2"}`)},
		}}}}}
	return c
}

// TestCheckpointV4Fixture: the frozen version 4 fixture is
// fullCheckpointV3 with tasks of kinds: a fetch with its input, a sleep,
// one with its input out of line.
func TestCheckpointV4Fixture(t *testing.T) {
	c := fullCheckpointV3()
	c.Turn = TurnState{Count: 3}
	c.Waits.Tasks = []TaskWait{
		{ID: "t3-1-task", Kind: "fetch", Input: json.RawMessage(`{"url":"https://example.com/a"}`)},
		{ID: "t2-1-task", Duration: 2 * time.Second},
		{ID: "t1-1-task", Kind: "fetch", InputRef: &BlobRef{Digest: "sha256:" + strings.Repeat("ab", 32), Size: 9000}},
	}
	b, err := EncodeCheckpoint(c)
	if err != nil {
		t.Fatal(err)
	}
	frozen(t, "testdata/checkpoint/state_v4.json", append(b, '\n'))
	d, err := DecodeCheckpoint(b)
	if err != nil || d.Waits.Tasks[1].KindOf() != TaskSleep || d.Waits.Tasks[0].KindOf() != "fetch" {
		t.Fatalf("decoded %+v, %v", d.Waits.Tasks, err)
	}
}

// parentDelivery is a delivery a parent sends its child's session.
func parentDelivery() Command {
	return Command{Kind: KindDeliver, ID: "c7", AcceptedDeploymentID: "dep-1", AcceptedAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		ParentSessionID: "sess-1", Handle: "researcher", Depth: 1,
		Deliver: &Deliver{Mode: ModeQueue, Payloads: []Payload{{Message: TextMessage("Find the weather in Lisbon.")}}}}
}

// fullCheckpointV5 uses everything state version 5 added: handles (one
// active with its delegated message still to confirm, one parked), a
// descendant's wait, the session's own parent, a send, a delegated turn
// with outputs, and admitted inputs from a child and from the parent.
func fullCheckpointV5() Checkpoint {
	c := fullCheckpointV3()
	c.Handles = []HandleState{
		{Handle: "researcher", Generation: 2, ChildSessionID: "sess-2", DeploymentID: "dep-1", State: HandleActive,
			TurnID: "t1", CommandID: "c7", Wait: true},
		{Handle: "mailer", Generation: 1, ChildSessionID: "sess-3", DeploymentID: "dep-2", State: HandleParked},
	}
	c.ChildWaits = []ChildWait{{Handle: "researcher", ChildSessionID: "sess-2", RequestID: "req-7", Question: "Which city?"}}
	c.Parent = &ParentRef{SessionID: "sess-0", Handle: "assistant", Depth: 1}
	c.Sends = []Send{{SessionID: "sess-2", DeploymentID: "dep-1", Alias: "child.sess-1.researcher.2", Command: parentDelivery()}}
	c.Turn = TurnState{Count: 3, Live: true, ID: "t3", Open: true, Delegated: true, Outputs: []string{"Looking it up."},
		Inputs: []TurnInput{
			{Seq: 47, ID: "c8", Kind: KindChildResult, Deployment: "dep-1", Child: &ChildRef{Handle: "mailer", SessionID: "sess-3",
				CommandID: "c5", TurnID: "t1", Outcome: ChildDone, Outputs: []string{"sent"}, Usage: Usage{InputTokens: 9}}},
			{Seq: 48, ID: "c9", Kind: KindDeliver, Mode: ModeQueue, Text: "go on", Deployment: "dep-1",
				Parent: &ParentRef{SessionID: "sess-0", Handle: "assistant", Depth: 1}},
		}}
	return c
}

// v5Handles is fullCheckpointV5's handles with the first one changed.
func v5Handles(change func(*HandleState)) []HandleState {
	hs := fullCheckpointV5().Handles
	change(&hs[0])
	return hs
}

// TestCheckpointV5Fixture: the frozen version 5 fixture is
// fullCheckpointV5; it decodes to the same value.
func TestCheckpointV5Fixture(t *testing.T) {
	b, err := EncodeCheckpoint(fullCheckpointV5())
	if err != nil {
		t.Fatal(err)
	}
	frozen(t, "testdata/checkpoint/state_v5.json", append(b, '\n'))
	d, err := DecodeCheckpoint(b)
	if err != nil || d.StateV != 5 || d.ActiveChildren() != 2 || d.Sends[0].Command.V != CurrentVersion {
		t.Fatalf("decoded %+v, %v", d, err)
	}
	if again, err := EncodeCheckpoint(d); err != nil || !bytes.Equal(again, b) {
		t.Fatalf("not a fixed point: %v", err)
	}
}

// TestCheckpointV3Fixture: the frozen version 3 fixture is fullCheckpointV3
// (-create-schemas writes it when it is missing, like a frozen schema).
func TestCheckpointV3Fixture(t *testing.T) {
	b, err := EncodeCheckpoint(fullCheckpointV3())
	if err != nil {
		t.Fatal(err)
	}
	frozen(t, "testdata/checkpoint/state_v3.json", append(b, '\n'))
}

func TestCheckpointRoundTrip(t *testing.T) {
	b, err := EncodeCheckpoint(fullCheckpoint())
	if err != nil {
		t.Fatal(err)
	}
	c, err := DecodeCheckpoint(b)
	if err != nil {
		t.Fatal(err)
	}
	if c.StateV != 1 || c.Timer.Deadline.Location() != time.UTC || string(c.State) != `{"counter":3}` {
		t.Fatalf("decoded %+v", c)
	}
	again, err := EncodeCheckpoint(c)
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("not a fixed point: %v\n%s\n%s", err, b, again)
	}
	back, _ := DecodeCheckpoint(again)
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip changed the value")
	}
}

// A successor refuses a state version it cannot read before activating.
func TestCheckpointStateVersion(t *testing.T) {
	b, _ := EncodeCheckpoint(fullCheckpoint())
	for _, tt := range []struct {
		in    string
		wantV int
	}{
		{strings.Replace(string(b), `"stateV":1`, fmt.Sprintf(`"stateV":%d`, CurrentStateVersion+1), 1), CurrentStateVersion + 1},
		{strings.Replace(string(b), `"stateV":1`, `"stateV":0`, 1), 0},
		{strings.Replace(string(b), `"stateV":1,`, ``, 1), 0},
		{strings.Replace(string(b), `"stateV":1`, `"stateV":"1"`, 1), 0},
	} {
		_, err := DecodeCheckpoint([]byte(tt.in))
		var se *StateError
		if !errors.Is(err, ErrUnsupportedState) || !errors.As(err, &se) || se.StateV != tt.wantV {
			t.Errorf("err = %v, want ErrUnsupportedState with stateV %d", err, tt.wantV)
		}
	}
	if v, err := ReadStateVersion(b); err != nil || v != 1 {
		t.Errorf("ReadStateVersion = %d, %v", v, err)
	}
	future := strings.Replace(string(b), `"stateV":1`, `"stateV":4,"newField":true`, 1)
	if v, err := ReadStateVersion([]byte(future)); err != nil || v != 4 {
		t.Errorf("ReadStateVersion(future) = %d, %v", v, err)
	}
}

func TestCheckpointRejects(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", MaxInlineBytes) + `"`)
	tests := []struct {
		name   string
		change func(*Checkpoint)
		want   error
	}{
		{"state both", func(c *Checkpoint) { r := NewBlobRef([]byte("h")); c.StateRef = &r }, ErrInvalid},
		{"state both", func(c *Checkpoint) { r := NewBlobRef([]byte("s")); c.StateRef = &r }, ErrInvalid},
		{"bad ref", func(c *Checkpoint) { c.HistorySegments = []BlobRef{{Digest: "md5:x"}} }, ErrInvalid},
		{"inline state too large", func(c *Checkpoint) { c.State = big }, ErrTooLarge},
		{"inline history too large", func(c *Checkpoint) { c.History = []HistoryEntry{{Role: "user", Data: big}} }, ErrTooLarge},
		{"state invalid json", func(c *Checkpoint) { c.State = json.RawMessage(`{`) }, ErrInvalid},
		{"outputSchema not object", func(c *Checkpoint) { c.OutputSchema = json.RawMessage(`true`) }, ErrInvalid},
		{"bad session", func(c *Checkpoint) { c.SessionID = "a.b" }, ErrInvalid},
		{"no tokens", func(c *Checkpoint) { c.Tokens = nil }, ErrInvalid},
		{"empty token", func(c *Checkpoint) { c.Tokens = []string{""} }, ErrInvalid},
		{"negative timeout", func(c *Checkpoint) { c.Timeout = -1 }, ErrInvalid},
		{"timer without id", func(c *Checkpoint) { c.Timer.ID = "" }, ErrInvalid},
		{"applied above not ascending", func(c *Checkpoint) { c.Applied.Above = []uint64{50, 45} }, ErrInvalid},
		{"applied above below low", func(c *Checkpoint) { c.Applied.Above = []uint64{41} }, ErrInvalid},
		{"outbox gap", func(c *Checkpoint) { c.EventSeq = 13 }, ErrInvalid},
		{"outbox other session", func(c *Checkpoint) { c.Outbox[0].SessionID = "other" }, ErrInvalid},
		{"outbox bad event", func(c *Checkpoint) { c.Outbox[1].DeploymentID = "latest" }, ErrInvalid},
		{"handle name", func(c *Checkpoint) { c.Handles = v5Handles(func(h *HandleState) { h.Handle = "a.b" }) }, ErrInvalid},
		{"handle twice", func(c *Checkpoint) { c.Handles = v5Handles(func(h *HandleState) { h.Handle = "mailer" }) }, ErrInvalid},
		{"handle state", func(c *Checkpoint) { c.Handles = v5Handles(func(h *HandleState) { h.State = "asleep" }) }, ErrInvalid},
		{"handle generation", func(c *Checkpoint) { c.Handles = v5Handles(func(h *HandleState) { h.Generation = 0 }) }, ErrInvalid},
		{"active without command", func(c *Checkpoint) { c.Handles = v5Handles(func(h *HandleState) { h.CommandID = "" }) }, ErrInvalid},
		{"handle deployment", func(c *Checkpoint) { c.Handles = v5Handles(func(h *HandleState) { h.DeploymentID = "latest" }) }, ErrInvalid},
		{"handle child session", func(c *Checkpoint) { c.Handles = v5Handles(func(h *HandleState) { h.ChildSessionID = "a b" }) }, ErrInvalid},
		{"send bad command", func(c *Checkpoint) { c.Sends = fullCheckpointV5().Sends; c.Sends[0].Command.Depth = 0 }, ErrInvalid},
		{"send alias without deployment", func(c *Checkpoint) {
			c.Sends = fullCheckpointV5().Sends
			c.Sends[0].DeploymentID = ""
		}, ErrInvalid},
		{"child wait both", func(c *Checkpoint) {
			c.ChildWaits = []ChildWait{{Handle: "h", ChildSessionID: "s", RequestID: "r", AttemptID: "a"}}
		}, ErrInvalid},
		{"child wait neither", func(c *Checkpoint) { c.ChildWaits = []ChildWait{{Handle: "h", ChildSessionID: "s"}} }, ErrInvalid},
		{"child wait no session", func(c *Checkpoint) { c.ChildWaits = []ChildWait{{Handle: "h", RequestID: "r"}} }, ErrInvalid},
		{"parent depth 0", func(c *Checkpoint) { c.Parent = &ParentRef{SessionID: "p", Handle: "h"} }, ErrInvalid},
		{"parent too deep", func(c *Checkpoint) { c.Parent = &ParentRef{SessionID: "p", Handle: "h", Depth: MaxDepth + 1} }, ErrInvalid},
		{"send session", func(c *Checkpoint) {
			c.Sends = []Send{{SessionID: "a.b", Command: fullCheckpointV5().Sends[0].Command}}
		}, ErrInvalid},
		{"send command", func(c *Checkpoint) {
			c.Sends = fullCheckpointV5().Sends
			c.Sends[0].Command.Deliver = nil
		}, ErrInvalid},
		{"input parent depth", func(c *Checkpoint) {
			c.Turn = TurnState{Inputs: []TurnInput{{Seq: 1, ID: "c", Kind: KindCancel, Parent: &ParentRef{SessionID: "p", Handle: "h"}}}}
		}, ErrInvalid},
		{"input child handle", func(c *Checkpoint) {
			c.Turn = TurnState{Inputs: []TurnInput{{Seq: 1, ID: "c", Kind: KindChildResult, Child: &ChildRef{SessionID: "s"}}}}
		}, ErrInvalid},
		{"too large", func(c *Checkpoint) {
			c.History, c.State = nil, nil
			for i := range 60 {
				e := envelope(EventMessageOutput, MessageOutput{Text: strings.Repeat("y", MaxEventDataBytes-100)})
				e.SessionID, e.Seq = "sess-1", uint64(i+1)
				c.Outbox = append(c.Outbox, e)
			}
			c.Outbox = c.Outbox[2:]
			c.EventSeq = 60
		}, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := fullCheckpoint()
			tt.change(&c)
			_, err := EncodeCheckpoint(c)
			var se *StateError
			if !errors.Is(err, tt.want) || !errors.As(err, &se) {
				t.Fatalf("err = %v, want %v as *StateError", err, tt.want)
			}
		})
	}
}

func TestCheckpointDecodeRejectsUnknownField(t *testing.T) {
	b, _ := EncodeCheckpoint(fullCheckpoint())
	in := strings.Replace(string(b), `"eventSeq":12`, `"eventSeq":12,"anchorRunId":"r"`, 1)
	if _, err := DecodeCheckpoint([]byte(in)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
}

func TestBlobRef(t *testing.T) {
	r := NewBlobRef([]byte("abc"))
	if r.Digest != "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" || r.Size != 3 {
		t.Fatalf("%+v", r)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := r.Verify([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if err := r.Verify([]byte("abd")); !errors.Is(err, ErrDigestMismatch) {
		t.Fatalf("err = %v", err)
	}
	hex := r.Digest[len("sha256:"):]
	for _, bad := range []BlobRef{
		{Digest: "sha256:" + strings.ToUpper(hex), Size: 3}, {Digest: "sha256:" + hex[:63], Size: 3},
		{Digest: "sha256:" + hex + "0", Size: 3}, {Digest: "sha512:" + hex, Size: 3},
		{Digest: "sha256:" + hex[:63] + "g", Size: 3}, {Digest: "sha256:" + hex[:63] + "/", Size: 3},
		{Digest: "", Size: 0}, {Digest: r.Digest, Size: -1},
	} {
		if err := bad.Validate(); !errors.Is(err, ErrInvalid) {
			t.Fatalf("%+v: err = %v, want ErrInvalid", bad, err)
		}
	}
}

// A checkpoint of a state version this build does not read still yields
// its stable members to PeekCheckpoint; junk does not.
func TestPeekCheckpoint(t *testing.T) {
	b := []byte(`{"stateV":99,"sessionId":"s1","eventSeq":7,"tokens":["s1","C1.2"],"applied":{"low":5,"above":[8]},"futureField":{"x":1}}`)
	if _, err := DecodeCheckpoint(b); !errors.Is(err, ErrUnsupportedState) {
		t.Fatalf("decoded: %v", err)
	}
	p, err := PeekCheckpoint(b)
	if err != nil || p.StateV != 99 || p.SessionID != "s1" || p.EventSeq != 7 || len(p.Tokens) != 2 || p.Applied.Low != 5 || len(p.Applied.Above) != 1 {
		t.Fatalf("%+v %v", p, err)
	}
	if _, err := PeekCheckpoint([]byte("not json")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("junk: %v", err)
	}
}

// TestClosedEndIsVersion5: a session its parent closed (ended "closed")
// is written at state version 5, which alone knows that reason.
func TestClosedEndIsVersion5(t *testing.T) {
	c := fullCheckpoint()
	c.Ended = EndClosed
	b, err := EncodeCheckpoint(c)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := ReadStateVersion(b); v != 5 {
		t.Fatalf("state version %d, want 5", v)
	}
	if d, err := DecodeCheckpoint(b); err != nil || d.Ended != EndClosed {
		t.Fatalf("decoded %q, %v", d.Ended, err)
	}
}
