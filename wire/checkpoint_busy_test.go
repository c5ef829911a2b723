package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// busyInputs are two debounced deliveries gathered in an open window.
func busyInputs() []TurnInput {
	return []TurnInput{
		{Seq: 50, ID: "c20", Kind: KindDeliver, Mode: ModeDebounce, Caller: "slack:U42", Deployment: "dep-1", Text: "and also"},
		{Seq: 52, ID: "c21", Kind: KindDeliver, Caller: "slack:U42", Deployment: "dep-1", Text: "check Porto too"},
	}
}

// stepInterrupted is the runtime's history entry of a step an interrupt
// aborted.
func stepInterrupted(step string) HistoryEntry {
	return HistoryEntry{Role: RoleSystem, Kind: EntryStepInterrupted, Content: []Part{{Type: PartText, Text: "step " + step + " interrupted"}}}
}

// fullCheckpointV9 uses everything state version 9 added: a default mode
// of debounce with its window, an open debounce window of two deliveries,
// a live turn with what it found when it started, the calls it made and an
// interrupt-mode input admitted into it, and the history entry of the
// step the interrupt aborted.
func fullCheckpointV9() Checkpoint {
	c := fullCheckpoint()
	c.DefaultMode, c.DefaultDebounceMs, c.BusyModes = ModeDebounce, 2000, true
	opened := time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("x", 3600))
	c.Debounce = &DebounceWindow{OpenedAt: opened, Until: opened.Add(2 * time.Second), TimerID: "debounce-c20", Inputs: busyInputs()}
	c.History = append(c.History, stepInterrupted("2"))
	c.Waits = Waits{}
	c.Turn = TurnState{Count: 4, Live: true, ID: "t4", Caller: "slack:U42", Open: true, Step: 2, CommandID: "c18",
		Inputs: []TurnInput{{Seq: 49, ID: "c19", Kind: KindDeliver, Mode: ModeInterrupt, Caller: "slack:U42", Deployment: "dep-1",
			Text: "Stop — use Porto instead."}},
		Before: &TurnBefore{State: json.RawMessage(`{"counter": 2}`), HistoryLen: 2},
		Calls:  []CallRef{{Name: "charge_card", Step: 1, Position: 0}, {Name: "send_email", Step: 2, Position: 1}},
	}
	return c
}

// TestCheckpointV9Fixture: the frozen version 9 fixture is
// fullCheckpointV9; it decodes to the same value.
func TestCheckpointV9Fixture(t *testing.T) {
	b, err := EncodeCheckpoint(fullCheckpointV9())
	if err != nil {
		t.Fatal(err)
	}
	frozen(t, "testdata/checkpoint/state_v9.json", append(b, '\n'))
	d, err := DecodeCheckpoint(b)
	if err != nil || d.StateV != BusyStateVersion {
		t.Fatalf("decoded stateV %d, %v", d.StateV, err)
	}
	if d.DefaultMode != ModeDebounce || d.DefaultDebounceMs != 2000 || d.Debounce == nil || len(d.Debounce.Inputs) != 2 ||
		d.Debounce.Until.Sub(d.Debounce.OpenedAt) != 2*time.Second || d.Debounce.OpenedAt.Location() != time.UTC ||
		d.Turn.Before == nil || string(d.Turn.Before.State) != `{"counter":2}` || d.Turn.Before.HistoryLen != 2 ||
		len(d.Turn.Calls) != 2 || d.Turn.Inputs[0].Mode != ModeInterrupt || d.History[2].Kind != EntryStepInterrupted {
		t.Fatalf("decoded %+v", d)
	}
	if again, err := EncodeCheckpoint(d); err != nil || !bytes.Equal(again, b) {
		t.Fatalf("not a fixed point: %v", err)
	}
	if err := debugCheck(checkpointContract(8), b); err == nil {
		t.Error("the version-8 schema accepts the version-9 fixture")
	}
}

// withoutBusy is c without any content of state version 9.
func withoutBusy(c Checkpoint) Checkpoint {
	c.DefaultMode, c.DefaultDebounceMs, c.Debounce, c.BusyModes = "", 0, nil, false
	c.Turn.Before, c.Turn.Calls = nil, nil
	var inputs []TurnInput
	for _, in := range c.Turn.Inputs {
		if !LegacyMode(in.Mode) {
			in.Mode = ModeSteer
		}
		inputs = append(inputs, in)
	}
	c.Turn.Inputs = inputs
	var history []HistoryEntry
	for _, h := range c.History {
		if h.Kind != EntryStepInterrupted {
			history = append(history, h)
		}
	}
	c.History = history
	return c
}

// State version 9 is written only for content of the busy modes: each
// member alone forces it (and then version 8's frozen schema, and
// DecodeCheckpoint declaring 8, refuse the checkpoint), and a checkpoint
// without any is written at the version it had before, byte for byte as
// the shipped code writes it.
func TestBusyLowestVersion(t *testing.T) {
	if c := withoutBusy(fullCheckpointV9()); c.lowestVersion() >= BusyStateVersion {
		t.Errorf("fullCheckpointV9 without busy content: state version %d", c.lowestVersion())
	}
	for _, tt := range []struct {
		name    string
		c       Checkpoint
		fixture string
	}{
		{"v3", fullCheckpointV3(), "testdata/checkpoint/state_v3.json"},
		{"v5", fullCheckpointV5(), "testdata/checkpoint/state_v5.json"},
		{"v6", fullCheckpointV6(), "testdata/checkpoint/state_v6.json"},
		{"v7", fullCheckpointV7(), "testdata/checkpoint/state_v7.json"},
		{"v8", fullCheckpointV8(), "testdata/checkpoint/state_v8.json"},
		{"v9 without its content", withoutBusy(fullCheckpointV9()), ""},
	} {
		b, err := EncodeCheckpoint(tt.c)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if v, _ := ReadStateVersion(b); v >= BusyStateVersion {
			t.Errorf("%s: state version %d", tt.name, v)
		}
		if tt.fixture != "" && !bytes.Equal(b, bytes.TrimRight(readFile(t, tt.fixture), "\n")) {
			t.Errorf("%s is not what the shipped code writes:\n got %s", tt.name, b)
		}
	}
	v9 := fullCheckpointV9()
	for name, change := range map[string]func(*Checkpoint){
		"busy modes used":    func(c *Checkpoint) { c.BusyModes = true },
		"default mode":       func(c *Checkpoint) { c.DefaultMode = ModeLatest },
		"default mode queue": func(c *Checkpoint) { c.DefaultMode = ModeQueue },
		"default debounce":   func(c *Checkpoint) { c.DefaultMode, c.DefaultDebounceMs = ModeDebounce, 2000 },
		"debounce window":    func(c *Checkpoint) { c.Debounce = v9.Debounce },
		"turn before":        func(c *Checkpoint) { c.Turn = v9.Turn; c.Turn.Inputs, c.Turn.Calls = nil, nil },
		"empty turn before":  func(c *Checkpoint) { c.Turn = TurnState{Count: 4, Live: true, ID: "t4", Before: &TurnBefore{}} },
		"turn calls":         func(c *Checkpoint) { c.Turn = v9.Turn; c.Turn.Inputs, c.Turn.Before = nil, nil },
		"interrupt input":    func(c *Checkpoint) { c.Turn = v9.Turn; c.Turn.Before, c.Turn.Calls = nil, nil },
		"rollback input": func(c *Checkpoint) {
			in := busyInputs()[0]
			in.Mode = ModeRollback
			c.Turn = TurnState{Count: 4, Live: true, ID: "t4", Inputs: []TurnInput{in}}
		},
		"step_interrupted entry":  func(c *Checkpoint) { c.History = append(c.History, stepInterrupted("1")) },
		"step_interrupted in v8":  func(c *Checkpoint) { *c = fullCheckpointV8(); c.History = append(c.History, stepInterrupted("1")) },
		"default mode in v7":      func(c *Checkpoint) { *c = fullCheckpointV7(); c.DefaultMode = ModeInterrupt },
		"debounce window with v5": func(c *Checkpoint) { *c = fullCheckpointV5(); c.Debounce = v9.Debounce },
	} {
		c := fullCheckpoint()
		change(&c)
		b, err := EncodeCheckpoint(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if v, _ := ReadStateVersion(b); v != BusyStateVersion {
			t.Errorf("%s: state version %d, want %d", name, v, BusyStateVersion)
		}
		if err := debugCheck(checkpointContract(BusyStateVersion), b); err != nil {
			t.Errorf("%s: the version-9 schema refuses it: %v", name, err)
		}
		declared := strings.Replace(string(b), `"stateV":9`, `"stateV":8`, 1)
		if _, err := DecodeCheckpoint([]byte(declared)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s declared at version 8: %v, want ErrInvalid", name, err)
		}
		n := normalizeCheckpoint(c)
		n.StateV = 8
		if err := n.validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "needs state version 9") {
			t.Errorf("%s: the Go rules accept it at version 8: %v", name, err)
		}
	}
	// An input of mode queue, steer or none needs nothing new.
	for _, mode := range []string{"", ModeQueue, ModeSteer} {
		c := fullCheckpoint()
		c.Turn = TurnState{Count: 4, Live: true, ID: "t4", Inputs: []TurnInput{{Seq: 49, ID: "c19", Kind: KindDeliver, Mode: mode, Text: "x"}}}
		if n := normalizeCheckpoint(c); n.lowestVersion() != 1 {
			v := n.lowestVersion()
			t.Errorf("an input of mode %q: state version %d, want 1", mode, v)
		}
	}
}

// The rules of the busy content, at state version 9.
func TestBusyCheckpointRules(t *testing.T) {
	for name, change := range map[string]func(*Checkpoint){
		"unknown default mode":               func(c *Checkpoint) { c.DefaultMode = "later" },
		"default window 100":                 func(c *Checkpoint) { c.DefaultDebounceMs = 100 },
		"default window too long":            func(c *Checkpoint) { c.DefaultDebounceMs = MaxDebounceMs + 1 },
		"default window with queue":          func(c *Checkpoint) { c.DefaultMode = ModeQueue },
		"default window without a mode":      func(c *Checkpoint) { c.DefaultMode = "" },
		"window without a timer":             func(c *Checkpoint) { c.Debounce.TimerID = "" },
		"window without inputs":              func(c *Checkpoint) { c.Debounce.Inputs = nil },
		"window until before openedAt":       func(c *Checkpoint) { c.Debounce.Until = c.Debounce.OpenedAt.Add(-time.Millisecond) },
		"window opened at the zero time":     func(c *Checkpoint) { c.Debounce.OpenedAt = time.Time{} },
		"window of a cancel":                 func(c *Checkpoint) { c.Debounce.Inputs[1] = TurnInput{Seq: 53, ID: "c22", Kind: KindCancel} },
		"window input without an id":         func(c *Checkpoint) { c.Debounce.Inputs[1].ID = "" },
		"window input of an unknown mode":    func(c *Checkpoint) { c.Debounce.Inputs[1].Mode = "later" },
		"window input inline and referenced": func(c *Checkpoint) { ref := NewBlobRef([]byte("t")); c.Debounce.Inputs[0].TextRef = &ref },
		"window of a configure":              func(c *Checkpoint) { c.Debounce.Inputs[1].Kind = KindConfigure },
		"before inline and referenced":       func(c *Checkpoint) { ref := NewBlobRef([]byte("s")); c.Turn.Before.StateRef = &ref },
		"before referenced badly":            func(c *Checkpoint) { c.Turn.Before.State, c.Turn.Before.StateRef = nil, &BlobRef{Digest: "sha256:00"} },
		"before history negative":            func(c *Checkpoint) { c.Turn.Before.HistoryLen = -1 },
		"call without a name":                func(c *Checkpoint) { c.Turn.Calls[0].Name = "" },
		"call of step 0":                     func(c *Checkpoint) { c.Turn.Calls[0].Step = 0 },
		"call at position -1":                func(c *Checkpoint) { c.Turn.Calls[1].Position = -1 },
		"input of an unknown mode":           func(c *Checkpoint) { c.Turn.Inputs[0].Mode = "later" },
		"configure input":                    func(c *Checkpoint) { conf := validConfigure(); c.Turn.Inputs[0] = conf.Input(49) },
		"step_interrupted of the user":       func(c *Checkpoint) { c.History[2].Role = RoleUser },
		"send of a configure":                func(c *Checkpoint) { c.Sends = []Send{{SessionID: "sess-2", Command: validConfigure()}} },
		"send of a debounce":                 func(c *Checkpoint) { c.Sends = []Send{{SessionID: "sess-2", Command: validDebounce()}} },
		"send of an interrupt": func(c *Checkpoint) {
			s := validDeliver()
			s.Deliver.Mode = ModeInterrupt
			c.Sends = []Send{{SessionID: "sess-2", Command: s}}
		},
		"send without a mode": func(c *Checkpoint) {
			s := validDeliver()
			s.Deliver.Mode = ""
			c.Sends = []Send{{SessionID: "sess-2", Command: s}}
		},
		"pending send of a latest": func(c *Checkpoint) {
			p := pendingSend()
			p.Send.Command.Deliver.Mode = ModeLatest
			c.PendingSends = []PendingSend{p}
		},
	} {
		c := fullCheckpointV9()
		c.Debounce.Inputs = busyInputs()
		change(&c)
		if _, err := EncodeCheckpoint(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	c := fullCheckpointV9()
	c.Turn.Before.State = json.RawMessage(`"` + strings.Repeat("s", MaxInlineBytes) + `"`)
	if _, err := EncodeCheckpoint(c); !errors.Is(err, ErrTooLarge) {
		t.Errorf("inline turn.before.state over MaxInlineBytes: %v, want ErrTooLarge", err)
	}
	for name, change := range map[string]func(*Checkpoint){
		"window until openedAt":    func(c *Checkpoint) { c.Debounce.Until = c.Debounce.OpenedAt },
		"default latest":           func(c *Checkpoint) { c.DefaultMode, c.DefaultDebounceMs = ModeLatest, 0 },
		"default debounce without": func(c *Checkpoint) { c.DefaultDebounceMs = 0 },
		"before referenced": func(c *Checkpoint) {
			ref := NewBlobRef([]byte("s"))
			c.Turn.Before.State, c.Turn.Before.StateRef = nil, &ref
		},
		"window of one": func(c *Checkpoint) { c.Debounce.Inputs = c.Debounce.Inputs[:1] },
		"window input by payloads": func(c *Checkpoint) {
			c.Debounce.Inputs[1].Text = ""
			c.Debounce.Inputs[1].Payloads = []Payload{{Message: TextMessage("check Porto too"), Context: []string{"c"}}}
		},
	} {
		c := fullCheckpointV9()
		change(&c)
		b, err := EncodeCheckpoint(c)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if _, err := DecodeCheckpoint(b); err != nil {
			t.Errorf("%s: decode: %v", name, err)
		}
	}
}

// command.superseded and turn.rolled_back: built from their typed bodies
// at data version 1, their data checked, and round-tripped through the
// event codec; a rollback without calls is written "calls":[].
func TestCommandSuperseded(t *testing.T) {
	checkNewKind(t, CommandSuperseded{CommandID: "c6", Seq: 52, By: 53},
		`{"commandId":"c6","seq":52,"by":53}`,
		CommandSuperseded{Seq: 52, By: 53},
		CommandSuperseded{CommandID: "c6", By: 53},
		CommandSuperseded{CommandID: "c6", Seq: 52})
}

func TestTurnRolledBack(t *testing.T) {
	checkNewKind(t, TurnRolledBack{TurnID: "t4", Calls: []CallRef{{Name: "charge_card", Step: 1}, {Name: "send_email", Step: 2, Position: 1}}},
		`{"turnId":"t4","calls":[{"name":"charge_card","step":1,"position":0},{"name":"send_email","step":2,"position":1}]}`,
		TurnRolledBack{Calls: []CallRef{}},
		TurnRolledBack{TurnID: "t4", Calls: []CallRef{{Step: 1}}},
		TurnRolledBack{TurnID: "t4", Calls: []CallRef{{Name: "x"}}},
		TurnRolledBack{TurnID: "t4", Calls: []CallRef{{Name: "x", Step: 1, Position: -1}}})
	for _, body := range []EventBody{TurnRolledBack{TurnID: "t4"}, &TurnRolledBack{TurnID: "t4"}, TurnRolledBack{TurnID: "t4", Calls: []CallRef{}}} {
		checkNewKind(t, body, `{"turnId":"t4","calls":[]}`)
	}
	raw, _ := json.Marshal(TurnRolledBack{TurnID: "t4"})
	if err := DefaultEvents().ValidateData(EventTurnRolledBack, raw); err == nil {
		t.Errorf("%s accepted", raw)
	}
}
