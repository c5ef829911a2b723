package handoff

import (
	"errors"
	"fmt"
	"github.com/baton-rt/baton/internal/failpoint"
)

// hooks are the failpoints of a transaction (failpoint.HandoffSource*) or
// of an activation (failpoint.HandoffCandidate*) at the named crash
// points; a nil registry, in production, arms none. The before point runs
// before a step's action, the after point right after it (for a write:
// after the store answered, before the answer is looked at), with the
// step as the Detail. A non-nil error stops the transaction (or the
// activation) at once, exactly as a crash there would: nothing more is
// written and the error is returned. The after point may instead return
// ErrReplyLost: the write's answer is then dropped and settled the way a
// lost reply is.
type hooks struct {
	fp            *failpoint.Registry
	before, after failpoint.Name
	session       string
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

func (h hooks) runBefore(s Step) error {
	if err := h.fp.Eval(h.before, failpoint.Args{SessionID: h.session, Detail: string(s)}); err != nil {
		return &crashError{s, "before", err}
	}
	return nil
}

// runAfter runs the after point for s. ErrReplyLost replaces *result (the
// write's answer) and is not a stop.
func (h hooks) runAfter(s Step, result *error) error {
	err := h.fp.Eval(h.after, failpoint.Args{SessionID: h.session, Detail: string(s)})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrReplyLost):
		*result = err
		return nil
	}
	return &crashError{s, "after", err}
}

// hooks are a source transaction's failpoints.
func (x *run) hooks() hooks {
	return hooks{fp: x.t.Failpoints, before: failpoint.HandoffSourceBefore, after: failpoint.HandoffSourceAfter, session: x.req.SessionID}
}

// hooks are a candidate activation's failpoints.
func (a *activator) hooks() hooks {
	return hooks{fp: a.c.Failpoints, before: failpoint.HandoffCandidateBefore, after: failpoint.HandoffCandidateAfter, session: a.req.SessionID}
}
