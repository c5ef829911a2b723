package harness

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/baton-rt/baton/wire"
)

// Count is the number of events of kind.
func Count(evs []wire.Event, kind string) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// Kinds lists the events' kinds, for failure messages.
func Kinds(evs []wire.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind
	}
	return out
}

// Trace renders events as seq:kind@deployment, for failure messages about
// handoffs.
func Trace(evs []wire.Event) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "%d:%s@%s ", e.Seq, e.Kind, e.DeploymentID)
	}
	return b.String()
}

// Outputs lists the texts of the message.output events, in order.
func Outputs(evs []wire.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Kind == wire.EventMessageOutput {
			var d wire.MessageOutput
			_ = json.Unmarshal(ev.Data, &d)
			out = append(out, d.Text)
		}
	}
	return out
}

// All decodes the data of every event of kind.
func All[T any](evs []wire.Event, kind string) ([]T, error) {
	var out []T
	for _, ev := range evs {
		if ev.Kind != kind {
			continue
		}
		var v T
		if err := json.Unmarshal(ev.Data, &v); err != nil {
			return out, fmt.Errorf("event %d %s: %w", ev.Seq, kind, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// Applied decodes the command.applied events, in event order.
func Applied(evs []wire.Event) ([]wire.CommandApplied, error) {
	return All[wire.CommandApplied](evs, wire.EventCommandApplied)
}

// AppliedIDs maps every applied command ID to its inbox sequence (events
// whose data does not decode are skipped).
func AppliedIDs(evs []wire.Event) map[string]uint64 {
	out := map[string]uint64{}
	for _, ev := range evs {
		if ev.Kind == wire.EventCommandApplied {
			var d wire.CommandApplied
			_ = json.Unmarshal(ev.Data, &d)
			out[d.CommandID] = d.Seq
		}
	}
	return out
}

// StepKeys lists the committed step keys (turn.step) as <turnId>/<step>.
func StepKeys(evs []wire.Event) ([]string, error) {
	steps, err := All[wire.TurnStep](evs, wire.EventTurnStep)
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = fmt.Sprintf("%s/%d", s.TurnID, s.Step)
	}
	return out, err
}

// EventsBy returns the events stamped by owner run runID.
func EventsBy(evs []wire.Event, runID string) []wire.Event {
	var out []wire.Event
	for _, e := range evs {
		if e.OwnerRunID == runID {
			out = append(out, e)
		}
	}
	return out
}

// IsKind matches events of kind.
func IsKind(kind string) func(wire.Event) bool {
	return func(ev wire.Event) bool { return ev.Kind == kind }
}

// IsOutput matches the message.output of text.
func IsOutput(text string) func(wire.Event) bool {
	return func(ev wire.Event) bool {
		if ev.Kind != wire.EventMessageOutput {
			return false
		}
		var d wire.MessageOutput
		_ = json.Unmarshal(ev.Data, &d)
		return d.Text == text
	}
}

// IsApplied matches the command.applied of command ID id.
func IsApplied(id string) func(wire.Event) bool {
	return func(ev wire.Event) bool {
		if ev.Kind != wire.EventCommandApplied {
			return false
		}
		var d wire.CommandApplied
		_ = json.Unmarshal(ev.Data, &d)
		return d.CommandID == id
	}
}

// IsAppliedSeq matches the command.applied of the command at inbox seq.
func IsAppliedSeq(seq uint64) func(wire.Event) bool {
	return func(ev wire.Event) bool {
		if ev.Kind != wire.EventCommandApplied {
			return false
		}
		var d wire.CommandApplied
		return json.Unmarshal(ev.Data, &d) == nil && d.Seq == seq
	}
}

// Find returns the first event pred matches.
func Find(evs []wire.Event, pred func(wire.Event) bool) (wire.Event, bool) {
	if i := slices.IndexFunc(evs, pred); i >= 0 {
		return evs[i], true
	}
	return wire.Event{}, false
}

// OutputCommitted holds once text was output and its commit's turn.step
// follows it: a commit's events are appended in order and in the
// background, so the output alone does not mean the rest of its commit is
// on the stream yet.
func OutputCommitted(text string) func([]wire.Event) bool {
	return func(evs []wire.Event) bool {
		i := slices.IndexFunc(evs, IsOutput(text))
		return i >= 0 && slices.ContainsFunc(evs[i+1:], IsKind(wire.EventTurnStep))
	}
}
