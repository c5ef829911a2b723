package harness

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/baton-rt/baton/wire"
)

// CheckStream checks the invariants every session's stream keeps: seq
// contiguous from 1, and no command applied twice (by command ID or by
// inbox sequence). It returns the applied commands in event order.
func CheckStream(evs []wire.Event) ([]wire.CommandApplied, error) {
	if err := Contiguous(evs, 0); err != nil {
		return nil, fmt.Errorf("stream not contiguous: %w", err)
	}
	var out []wire.CommandApplied
	ids, seqs := map[string]bool{}, map[uint64]bool{}
	for _, ev := range evs {
		if ev.Kind != wire.EventCommandApplied {
			continue
		}
		var d wire.CommandApplied
		_ = json.Unmarshal(ev.Data, &d)
		if ids[d.CommandID] || seqs[d.Seq] {
			return out, fmt.Errorf("command %s (seq %d) applied twice", d.CommandID, d.Seq)
		}
		ids[d.CommandID], seqs[d.Seq] = true, true
		out = append(out, d)
	}
	return out, nil
}

// Contiguous checks that the events are seq from+1, from+2, … without a
// hole.
func Contiguous(evs []wire.Event, from uint64) error {
	for i, ev := range evs {
		if want := from + uint64(i) + 1; ev.Seq != want {
			return fmt.Errorf("event %d has seq %d, want %d", i, ev.Seq, want)
		}
	}
	return nil
}

// CommandIDs lists the applied commands' IDs.
func CommandIDs(applied []wire.CommandApplied) []string {
	out := make([]string, len(applied))
	for i, a := range applied {
		out[i] = a.CommandID
	}
	return out
}

// ByID maps the applied commands' IDs to their inbox sequences.
func ByID(applied []wire.CommandApplied) map[string]uint64 {
	out := make(map[string]uint64, len(applied))
	for _, a := range applied {
		out[a.CommandID] = a.Seq
	}
	return out
}

// TerminalOutcomes lists each command's terminal outcome events, by
// command ID: command.applied, command.rejected, command.superseded or
// wire.rejected. Every accepted command ends with exactly one.
func TerminalOutcomes(evs []wire.Event) map[string][]string {
	out := map[string][]string{}
	for _, ev := range evs {
		if slices.Contains(wire.TerminalKinds(), ev.Kind) {
			var d struct {
				CommandID string `json:"commandId"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			out[d.CommandID] = append(out[d.CommandID], ev.Kind)
		}
	}
	return out
}
