package runtime

import (
	"encoding/json"
	"testing"

	"github.com/baton-rt/baton/wire"
)

// A turn's turn.completed says why it stopped: error after a step that
// failed (data version 3, after the step's error event), done after one
// the agent completed (data version 2); the turn's usage is there either
// way. A fatal failure ends the session instead, with no turn.completed.
func TestTurnCompletedStopReason(t *testing.T) {
	usage := Usage{InputTokens: 7, OutputTokens: 2}
	for _, c := range []struct {
		name   string
		result StepResult
		before string // the kind right before turn.completed
		reason string // "": no turn.completed
		v      int
	}{
		{"failed step", StepResult{Error: "model unavailable", Usage: usage}, EventError, wire.StopError, 3},
		{"invalid result", StepResult{Outcome: "maybe", Usage: usage}, EventError, wire.StopError, 3},
		{"done", StepResult{Outcome: OutcomeDone, Usage: usage}, EventTurnStep, wire.StopDone, 2},
		{"fatal failure", StepResult{Error: "broken", Fatal: true, Usage: usage}, "", "", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := NewMachine(Config{SessionID: "s", RunID: "r", Deployment: "v1"},
				Snapshot{Started: true, Turns: 1, Turn: &Turn{ID: "t1", Open: true}})
			if err != nil {
				t.Fatal(err)
			}
			m.fold(&StepDone{TurnID: "t1", Step: 1, Result: c.result})
			evs := m.st.events
			i := indexOfKind(evs, EventTurnCompleted)
			if c.reason == "" {
				if i >= 0 || indexOfKind(evs, EventSessionEnded) < 0 {
					t.Fatalf("events %v, want session.ended and no turn.completed", kindsOf(evs))
				}
				return
			}
			if i < 1 || evs[i-1].Kind != c.before {
				t.Fatalf("events %v, want turn.completed right after %s", kindsOf(evs), c.before)
			}
			var d wire.TurnCompletedV3
			if err := json.Unmarshal(evs[i].Data, &d); err != nil {
				t.Fatal(err)
			}
			if evs[i].V != c.v || d.StopReason != c.reason || d.TurnID != "t1" || d.Usage != usage {
				t.Fatalf("turn.completed v%d %s, want v%d with stopReason %q and usage %+v", evs[i].V, evs[i].Data, c.v, c.reason, usage)
			}
		})
	}
}

func indexOfKind(evs []Event, kind string) int {
	for i, e := range evs {
		if e.Kind == kind {
			return i
		}
	}
	return -1
}

func kindsOf(evs []Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}
