package runtime

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/baton-rt/baton/wire"
)

func jsonClone(t *testing.T, s Snapshot) Snapshot {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var out Snapshot
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCloneMatchesJSON(t *testing.T) {
	full := Snapshot{
		Started: true, Applied: Applied{Next: 3, Above: []uint64{5, 7}, RecentIDs: []string{"a"}},
		EventSeq: 9, Turns: 2, History: []Entry{{Role: "user", Content: []Part{TextPart("hi")}}, {Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"a":1}`)}}}}, State: json.RawMessage(`{"k":1}`),
		Turn: &Turn{ID: "t2", Caller: "c", Steps: 1, Open: true, Inputs: []Command{{Seq: 4, ID: "x", Kind: KindDeliver, Value: json.RawMessage(`1`), TextRef: &wire.BlobRef{Digest: "sha256:00", Size: 1},
			Payloads: []Payload{{Message: &wire.Message{Parts: []Part{{Type: "image", URL: "u"}}}, Context: []string{"c"}, Ext: map[string]json.RawMessage{"k": json.RawMessage(`1`)}}}}},
			Usage: Usage{InputTokens: 3}},
		Waits:  Waits{Input: &InputWait{RequestID: "r"}, Auth: &AuthWait{AttemptID: "a"}, Tasks: []Task{{ID: "k", Duration: time.Second}}},
		Paused: true, Timer: &Timer{ID: "run", Deadline: time.Unix(1700000000, 0).UTC(), Duration: time.Minute},
		Aliases: []string{"x"}, Ended: "", Outbox: []Event{{Seq: 9, Kind: "k", Data: json.RawMessage(`{}`)}},
		Writer: Writer{RunID: "run", Write: 4}, Usage: Usage{OutputTokens: 2, CostUSD: 0.5},
	}
	for _, s := range []Snapshot{{}, full} {
		got := s.Clone()
		if want := jsonClone(t, s); !reflect.DeepEqual(jsonClone(t, got), want) {
			t.Fatalf("clone differs from a JSON round trip:\n%+v\n%+v", got, want)
		}
	}
	c := full.Clone()
	c.Turn.Inputs[0].Value[0], c.Waits.Input.RequestID, c.Outbox[0].Data[0] = '2', "z", '['
	c.Applied.Above[0], c.Timer.ID, c.Turn.Inputs[0].TextRef.Size = 99, "other", 2
	c.History = append(c.History, AssistantText("appended"))
	c.Turn.Inputs[0].Payloads[0].Message.Parts[0].URL = "v"
	c.Turn.Inputs[0].Payloads[0].Ext["k"][0] = '2'
	if full.History[0].Text() != "hi" || full.History[1].Role != RoleAssistant || len(full.History[1].ToolCalls) != 1 ||
		full.Turn.Inputs[0].Payloads[0].Message.Parts[0].URL != "u" || string(full.Turn.Inputs[0].Payloads[0].Ext["k"]) != "1" || string(full.Turn.Inputs[0].Value) != "1" || full.Waits.Input.RequestID != "r" ||
		string(full.Outbox[0].Data) != "{}" || full.Applied.Above[0] != 5 || full.Timer.ID != "run" ||
		full.Turn.Inputs[0].TextRef.Size != 1 {
		t.Fatal("clone shares memory with the original")
	}
}

// TestCloneSharesHistoryByAppendOnly: a clone shares the history (entries
// are immutable), and an append on either side never reaches the other.
func TestCloneSharesHistoryByAppendOnly(t *testing.T) {
	orig := Snapshot{History: make([]Entry, 2, 8)}
	orig.History[0], orig.History[1] = AssistantText("a"), AssistantText("b")
	c := orig.Clone()
	if &c.History[0] != &orig.History[0] {
		t.Fatal("the clone copied the history")
	}
	orig.History = append(orig.History, AssistantText("orig"))
	c.History = append(c.History, AssistantText("clone"))
	if len(c.History) != 3 || c.History[2].Text() != "clone" || orig.History[2].Text() != "orig" {
		t.Fatalf("an append reached the other side: clone %q, original %q", c.History[2].Text(), orig.History[2].Text())
	}
}
