package runtime

import (
	"testing"
)

// A turn that ends with tool calls left without a result gets a tool entry
// for each (IsError, "cancelled" on a cancel, "not run…" otherwise), in call
// order, after what the history holds: the next model request carries no
// unanswered call. Answered calls and older turns' calls are left alone.
func TestOpenToolCallsClosedWhenTheTurnEnds(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(m *Machine)
		text string
	}{
		{"cancelled", func(m *Machine) { m.cancelTurn() }, ToolCancelled},
		{"ended", func(m *Machine) { m.completeTurn(m.snap.Turn) }, ToolNotRun},
		{"finalized", func(m *Machine) { m.finalize(EndExpired) }, ToolCancelled},
	} {
		t.Run(c.name, func(t *testing.T) {
			snap := Snapshot{Started: true, Turns: 2, Turn: &Turn{ID: "t2", Steps: 1, Open: true}, History: []Entry{
				{Role: RoleUser, Content: []Part{TextPart("what is 12*7 and the weather?")}},
				{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "calculator"}, {ID: "c2", Name: "weather"}, {ID: "c3", Name: "calculator"}}},
				ToolResult("c2", "sunny", false),
				{Role: RoleUser, Content: []Part{TextPart("steered in")}},
			}}
			m, err := NewMachine(Config{SessionID: "s", RunID: "r", Deployment: "v1"}, snap)
			if err != nil {
				t.Fatal(err)
			}
			c.end(m)
			h := m.snap.History
			if len(h) != 6 {
				t.Fatalf("history %d entries: %+v", len(h), h)
			}
			for i, id := range []string{"c1", "c3"} {
				e := h[4+i]
				if e.Role != RoleTool || e.ToolCallID != id || !e.IsError || e.Text() != c.text {
					t.Fatalf("entry %d: %+v, want a %q error result for %s", 4+i, e, c.text, id)
				}
			}
			m2, _ := NewMachine(Config{SessionID: "s", RunID: "r", Deployment: "v1"}, Snapshot{Started: true, Turn: &Turn{ID: "t3", Open: true}, History: h})
			m2.cancelTurn()
			if len(m2.snap.History) != 6 {
				t.Fatalf("closed calls closed again: %+v", m2.snap.History[6:])
			}
		})
	}
}
