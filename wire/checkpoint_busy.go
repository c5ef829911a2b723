package wire

import (
	"errors"
	"fmt"
	"slices"
)

// The checkpoint content of the busy modes (state version 9,
// BusyStateVersion): the session's default mode and its debounce window
// (a configure command's), an open debounce window (the debounced
// deliveries gathered so far), what the live turn found when it started
// and the journaled calls it made (so a rollback can restore the one and
// report the other), admitted inputs of a busy mode and the runtime's
// history entries of kind step_interrupted. A checkpoint without any of
// them is written at its lower version, byte for byte as before.

// usesBusy reports content that state version 8 readers would drop or
// misread: anything of the busy modes. History segments cannot be looked
// into, so only the inline history counts.
func (c *Checkpoint) usesBusy() bool { return c.busyContent() != "" }

// busyContent names the first content of state version 9 c uses ("" for
// none).
func (c *Checkpoint) busyContent() string {
	switch {
	case c.BusyModes:
		return "busyModes"
	case c.DefaultMode != "":
		return "defaultMode"
	case c.DefaultDebounceMs != 0:
		return "defaultDebounceMs"
	case c.Debounce != nil:
		return "an open debounce window (debounce)"
	case c.Turn.Before != nil:
		return "turn.before"
	case len(c.Turn.Calls) > 0:
		return "turn.calls"
	}
	for i, in := range c.Turn.Inputs {
		if !LegacyMode(in.Mode) {
			return fmt.Sprintf("turn.inputs[%d] of mode %q", i, in.Mode)
		}
	}
	for i, h := range c.History {
		if h.Kind == EntryStepInterrupted {
			return fmt.Sprintf("history[%d] of kind %s", i, EntryStepInterrupted)
		}
	}
	return ""
}

// validateBusy checks the content of the busy modes: the default mode
// ("" is the built-in default, queue) and its window (only with debounce),
// the open debounce window, turn.before (its inline size and
// its reference are validateInline's) and turn.calls, and the runtime's
// step_interrupted entries (system entries).
func (c *Checkpoint) validateBusy() error {
	switch ms := c.DefaultDebounceMs; {
	case c.DefaultMode != "" && !ValidMode(c.DefaultMode):
		return fmt.Errorf("defaultMode %q is not one of %v", c.DefaultMode, Modes())
	case ms != 0 && c.DefaultMode != ModeDebounce:
		return errors.New("defaultDebounceMs is only for defaultMode debounce")
	case ms != 0 && (ms < MinDebounceMs || ms > MaxDebounceMs):
		return fmt.Errorf("defaultDebounceMs %d is not in %d..%d", ms, MinDebounceMs, MaxDebounceMs)
	}
	if w := c.Debounce; w != nil {
		if err := w.validate(); err != nil {
			return fmt.Errorf("debounce: %w", err)
		}
	}
	if b := c.Turn.Before; b != nil && b.HistoryLen < 0 {
		return fmt.Errorf("turn.before.historyLen %d is negative", b.HistoryLen)
	}
	for i, call := range c.Turn.Calls {
		if err := call.validate(); err != nil {
			return fmt.Errorf("turn.calls[%d]: %w", i, err)
		}
	}
	for i, h := range c.History {
		if h.Kind == EntryStepInterrupted && h.Role != RoleSystem {
			return fmt.Errorf("history[%d]: an entry of kind %s is a system entry, not %q", i, EntryStepInterrupted, h.Role)
		}
	}
	return nil
}

// validate checks an open debounce window: its timer, its times (until
// not before openedAt) and its deliveries, each valid as a stored input.
func (w *DebounceWindow) validate() error {
	if err := all(nonEmpty("timerId", w.TimerID), validTime("openedAt", w.OpenedAt), validTime("until", w.Until)); err != nil {
		return err
	}
	if w.Until.Before(w.OpenedAt) {
		return errors.New("until is before openedAt")
	}
	if len(w.Inputs) == 0 {
		return errors.New("an open window holds at least one delivery")
	}
	for i, in := range w.Inputs {
		if err := in.validateStored(); err != nil {
			return fmt.Errorf("inputs[%d]: %w", i, err)
		}
		if in.Kind != KindDeliver {
			return fmt.Errorf("inputs[%d]: a debounce window holds deliveries, not %q", i, in.Kind)
		}
	}
	return nil
}

// normalizeBusy gives the content of the busy modes its one in-memory form
// (copies, UTC times, compact raw JSON, empty collections nil).
func normalizeBusy(c *Checkpoint) {
	if w := c.Debounce; w != nil {
		n := DebounceWindow{OpenedAt: w.OpenedAt.UTC(), Until: w.Until.UTC(), TimerID: w.TimerID,
			Inputs: normalizeStoredInputs(w.Inputs)}
		c.Debounce = &n
	}
	if b := c.Turn.Before; b != nil {
		n := *b
		n.State = compactRaw(n.State)
		c.Turn.Before = &n
	}
	c.Turn.Calls = nilIfEmpty(slices.Clone(c.Turn.Calls))
}

// normalizeStoredInputs normalizes stored inputs as normalizeCheckpoint
// and normalizeChildren do the live turn's: a copy, compact values,
// empty payloads nil, copied references.
func normalizeStoredInputs(ins []TurnInput) []TurnInput {
	ins = nilIfEmpty(slices.Clone(ins))
	for i := range ins {
		in := &ins[i]
		in.Value = compactRaw(in.Value)
		in.Payloads = nilIfEmpty(slices.Clone(in.Payloads))
		if in.Parent != nil {
			p := *in.Parent
			in.Parent = &p
		}
		if in.Child != nil {
			ch := *in.Child
			ch.Outputs = nilIfEmpty(slices.Clone(ch.Outputs))
			in.Child = &ch
		}
	}
	return ins
}
