package handoff

import (
	"errors"
	"fmt"
)

// Hooks inject faults at the named crash points. Production code leaves
// them nil. Before runs before a step's action, After right after it (for a
// write: after the store answered, before the answer is looked at). A
// non-nil error stops the transaction (or the activation) at once, exactly
// as a crash there would: nothing more is written and the error is
// returned. After may instead return ErrReplyLost: the write's answer is
// then dropped and settled the way a lost reply is.
type Hooks struct {
	Before func(Step) error
	After  func(Step) error
}

// crashError is a stop injected by a hook.
type crashError struct {
	step Step
	when string
	err  error
}

func (e *crashError) Error() string {
	return fmt.Sprintf("handoff: stopped %s %s: %v", e.when, e.step, e.err)
}

func (e *crashError) Unwrap() error { return e.err }

func (h Hooks) before(s Step) error {
	if h.Before == nil {
		return nil
	}
	if err := h.Before(s); err != nil {
		return &crashError{s, "before", err}
	}
	return nil
}

// after runs the After hook for s. ErrReplyLost replaces *result (the
// write's answer) and is not a stop.
func (h Hooks) after(s Step, result *error) error {
	if h.After == nil {
		return nil
	}
	err := h.After(s)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrReplyLost):
		*result = err
		return nil
	}
	return &crashError{s, "after", err}
}
