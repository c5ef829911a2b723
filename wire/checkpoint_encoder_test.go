package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"pgregory.net/rapid"
)

// encodeCheckpointReference is EncodeCheckpoint as it was before the
// encoder: the checkpoint validated and encoded whole, every time.
func encodeCheckpointReference(c Checkpoint) ([]byte, error) {
	c = normalizeCheckpoint(c)
	c.StateV = c.lowestVersion()
	if err := c.validate(); err != nil {
		return nil, err
	}
	c.stampStored(StoredCommandVersion)
	b, err := marshal(c)
	if err != nil {
		return nil, stateFail(c.StateV, ErrInvalid, "marshal: %v", err)
	}
	if len(b) > MaxCheckpointBytes {
		return nil, stateFail(c.StateV, ErrTooLarge, "%d bytes, limit %d (move history or state to the object store)", len(b), MaxCheckpointBytes)
	}
	return b, nil
}

// agreeEncoder fails t unless x.Encode(c) and EncodeCheckpoint(c) give
// what the reference gives: the same bytes, or the same error.
func agreeEncoder(t interface {
	Helper()
	Fatalf(string, ...any)
}, x *CheckpointEncoder, c Checkpoint) {
	t.Helper()
	got, err := x.Encode(c)
	want, refErr := encodeCheckpointReference(c)
	whole, wholeErr := EncodeCheckpoint(c)
	switch {
	case (wholeErr == nil) != (refErr == nil) || wholeErr != nil && wholeErr.Error() != refErr.Error():
		t.Fatalf("EncodeCheckpoint: %v\nreference: %v", wholeErr, refErr)
	case !bytes.Equal(whole, want):
		t.Fatalf("EncodeCheckpoint wrote\n%s\nreference\n%s", whole, want)
	case (err == nil) != (refErr == nil) || err != nil && err.Error() != refErr.Error():
		t.Fatalf("Encode: %v\nreference: %v", err, refErr)
	case !bytes.Equal(got, want):
		t.Fatalf("Encode wrote\n%s\nreference\n%s", got, want)
	}
}

// genEntry draws a history entry: legacy or structured, with raw data,
// parts and tool calls, now and then one that does not validate (no role)
// or does not encode (raw data that is not JSON).
func genEntry(rt *rapid.T, label string) HistoryEntry {
	switch rapid.IntRange(0, 9).Draw(rt, label+".shape") {
	case 0:
		return HistoryEntry{Role: rapid.SampledFrom([]string{"", "user"}).Draw(rt, label+".role"), Text: "x"}
	case 1:
		return HistoryEntry{Role: "user", Data: json.RawMessage(rapid.SampledFrom([]string{`{"a":1}`, `{ "a" : 2 }`, `{`}).Draw(rt, label+".data"))}
	case 2, 3:
		return HistoryEntry{Role: RoleAssistant, Content: []Part{{Type: PartText, Text: rapid.String().Draw(rt, label+".text")}},
			ToolCalls: []ToolCall{{ID: "call-1", Name: "lookup", Arguments: json.RawMessage(rapid.SampledFrom([]string{`{}`, `{"q": "x"}`}).Draw(rt, label+".args"))}}}
	case 4:
		return HistoryEntry{Role: RoleTool, ToolCallID: "call-1", IsError: rapid.Bool().Draw(rt, label+".err"), Content: []Part{{Type: PartText, Text: "42"}}}
	}
	return HistoryEntry{Role: rapid.SampledFrom([]string{"user", "agent"}).Draw(rt, label+".role"), Text: rapid.String().Draw(rt, label+".text")}
}

// TestCheckpointEncoderAgrees: one encoder over a session's successive
// checkpoints — its history appended to, an entry replaced or edited in
// place, cut, cleared — writes exactly what encoding each whole did,
// errors included.
func TestCheckpointEncoderAgrees(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var x CheckpointEncoder
		c := genCheckpoint(rt)
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for s := range steps {
			label := fmt.Sprint("step", s)
			h := c.History
			switch rapid.IntRange(0, 5).Draw(rt, label) {
			case 0, 1, 2:
				for i := range rapid.IntRange(1, 3).Draw(rt, label+".add") {
					h = append(h, genEntry(rt, fmt.Sprint(label, ".add", i)))
				}
			case 3:
				if len(h) > 0 {
					h = append([]HistoryEntry(nil), h...)
					h[rapid.IntRange(0, len(h)-1).Draw(rt, label+".at")] = genEntry(rt, label+".new")
				}
			case 4:
				for i := range h {
					if string(h[i].Data) == `{"a":1}` {
						h[i].Data[5] = '3' // edited in place: the encoder keeps a copy
					}
				}
				h = h[:rapid.IntRange(0, len(h)).Draw(rt, label+".cut")]
			case 5:
				h = nil
			}
			c.History = h
			agreeEncoder(rt, &x, c)
		}
	})
}

// TestCheckpointEncoderLongSession: a session's commits, one or two
// entries at a time, up to a long inline history and past a seal (the
// history cleared): every commit's checkpoint is the reference's.
func TestCheckpointEncoderLongSession(t *testing.T) {
	var x CheckpointEncoder
	c := longCheckpoint()
	full := c.History
	for n := 0; n <= len(full); n++ {
		c.History = full[:n]
		agreeEncoder(t, &x, c)
	}
	c.History = nil
	agreeEncoder(t, &x, c)
	c.History = full[:3]
	agreeEncoder(t, &x, c)
	if len(x.entries) != 3 {
		t.Fatalf("the encoder keeps %d entries for a history of 3", len(x.entries))
	}
}

// TestCheckpointEncoderFixtures: every frozen state version's fixture,
// decoded, encodes as the reference encodes it.
func TestCheckpointEncoderFixtures(t *testing.T) {
	paths, err := filepath.Glob("testdata/checkpoint/state_v*.json")
	if err != nil || len(paths) < CurrentStateVersion {
		t.Fatalf("fixtures: %v %v", paths, err)
	}
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		c, err := DecodeCheckpoint(bytes.TrimSpace(raw))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		var x CheckpointEncoder
		agreeEncoder(t, &x, c)
		agreeEncoder(t, &x, c) // from the cache
	}
}

// TestHistoryEntrySame: same tells apart two entries that differ in any
// one member — every member HistoryEntry has, so a member added to it
// must be compared too — and holds for an entry and its clone.
func TestHistoryEntrySame(t *testing.T) {
	base := HistoryEntry{Role: RoleAssistant, Text: "t", Data: json.RawMessage(`{"a":1}`), Kind: "k",
		Content:   []Part{{Type: PartText, Text: "p"}},
		ToolCalls: []ToolCall{{ID: "c1", Name: "n", Arguments: json.RawMessage(`{}`)}}, ToolCallID: "c0"}
	if !base.same(base.clone()) {
		t.Fatal("an entry is not the same as its clone")
	}
	typ := reflect.TypeFor[HistoryEntry]()
	for i := range typ.NumField() {
		o := base.clone()
		f := reflect.ValueOf(&o).Elem().Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x")
		case reflect.Bool:
			f.SetBool(!f.Bool())
		case reflect.Slice:
			f.Set(reflect.MakeSlice(f.Type(), 0, 0)) // nil-equivalent: also differs from base's
			if f.Type() == reflect.TypeFor[json.RawMessage]() {
				f.SetBytes([]byte(`{"a":2}`))
			}
		default:
			t.Fatalf("member %s of kind %s: teach this test to change it", typ.Field(i).Name, f.Kind())
		}
		if base.same(o) {
			t.Errorf("same does not see a change of %s", typ.Field(i).Name)
		}
	}
	for _, edit := range []func(*HistoryEntry){
		func(e *HistoryEntry) { e.Content[0].Name = "file" },
		func(e *HistoryEntry) { e.ToolCalls[0].ID = "c2" },
		func(e *HistoryEntry) { e.ToolCalls[0].Name = "m" },
		func(e *HistoryEntry) { e.ToolCalls[0].Arguments = json.RawMessage(`{"b":1}`) },
	} {
		o := base.clone()
		edit(&o)
		if base.same(o) {
			t.Errorf("same does not see a change inside a part or a tool call: %+v", o)
		}
	}
}

// TestCheckpointEncoderCopiesEntries: an entry its caller edits in place
// after a commit (a raw value's bytes, a tool call's arguments) is
// encoded again, not taken from the cache.
func TestCheckpointEncoderCopiesEntries(t *testing.T) {
	var x CheckpointEncoder
	c := longCheckpoint()
	c.History = append(c.History[:2:2],
		HistoryEntry{Role: "user", Data: json.RawMessage(`{"a":1}`)},
		HistoryEntry{Role: RoleAssistant, Content: []Part{{Type: PartText, Text: "p"}},
			ToolCalls: []ToolCall{{ID: "c1", Name: "n", Arguments: json.RawMessage(`{"q":1}`)}}})
	agreeEncoder(t, &x, c)
	c.History[2].Data[5] = '3'
	c.History[3].ToolCalls[0].Arguments[5] = '4'
	c.History[3].Content[0].Text = "q" // the parts' slice, shared
	agreeEncoder(t, &x, c)
	b, err := x.Encode(c)
	if err != nil || !bytes.Contains(b, []byte(`"data":{"a":3}`)) || !bytes.Contains(b, []byte(`"arguments":{"q":4}`)) {
		t.Fatalf("%v\n%s", err, b)
	}
}
