package wire

import (
	"errors"
	"strings"
)

// The events of subagents (child.go declares their data types): the
// parent-side kinds child.started, child.completed, child.waiting and
// child.closed (data version 1), child.completed's data version 2 (the
// error of a failed delegation no child turn ran), session.ended's data version 3 (reason
// closed) and handoff.skipped's data version 2 (reason child). Each is
// written at the lowest data version that expresses it (LowestSessionEnded,
// LowestHandoffSkipped), so a reader that knows only the older versions
// reads every event that does not need the new reason.

// registerChildEvents adds the kinds and data versions of subagents to r,
// after registerBuiltins' versions of session.ended and handoff.skipped.
func registerChildEvents(r *EventRegistry) error {
	return errors.Join(
		registerBuiltin(r, EventChildStarted, func(d ChildStarted) error {
			return all(nonEmpty("handle", d.Handle), nonEmpty("childSessionId", d.ChildSessionID), validDeployment(d.DeploymentID))
		}),
		registerBuiltin(r, EventChildCompleted, func(d ChildCompleted) error {
			return all(nonEmpty("handle", d.Handle), nonEmpty("childSessionId", d.ChildSessionID), nonEmpty("turnId", d.TurnID),
				oneOf("outcome", d.Outcome, ChildDone, ChildFailed, ChildCancelled))
		}),
		registerBuiltin(r, EventChildWaiting, func(d ChildWaitingEvent) error {
			if (d.RequestID == "") == (d.AttemptID == "") {
				return errors.New("exactly one of requestId and attemptId")
			}
			return all(nonEmpty("handle", d.Handle), nonEmpty("childSessionId", d.ChildSessionID))
		}),
		registerBuiltin(r, EventChildClosed, func(d ChildClosed) error { return nonEmpty("handle", d.Handle) }),
		registerBuiltinV(r, EventChildCompleted, 2, func(d ChildCompletedV2) error {
			err := all(nonEmpty("handle", d.Handle), nonEmpty("childSessionId", d.ChildSessionID), nonEmpty("turnId", d.TurnID),
				oneOf("outcome", d.Outcome, ChildDone, ChildFailed, ChildCancelled))
			if err == nil && d.Error != nil {
				err = oneOf("error.code", d.Error.Code, CodeChildUnavailable, CodeChildGone)
			}
			return err
		}),
		registerBuiltinV(r, EventSessionEnded, 3, func(d SessionEndedV3) error {
			return oneOf("reason", d.Reason, EndDone, EndExpired, EndFailed, EndCancelled, EndTerminated, EndClosed)
		}),
		registerBuiltinV(r, EventHandoffSkipped, 2, func(d HandoffSkippedV2) error {
			return all(
				oneOf("reason", d.Reason, SkipBusy, SkipQueued, SkipInput, SkipAuthorization, SkipTask, SkipPaused, SkipChild),
				validDeployment(d.TargetDeploymentID), nonEmpty("commandId", d.CommandID), positive("seq", d.Seq))
		}),
	)
}

// LowestSessionEnded is session.ended's body for reason at the lowest data
// version that expresses it: 1 for done, expired, failed and cancelled, 2
// for terminated, 3 for closed, 4 for idle_expired (LowestSessionEndedBy
// adds who ended it).
func LowestSessionEnded(reason string) EventBody {
	switch reason {
	case EndTerminated:
		return SessionEndedV2{Reason: reason}
	case EndClosed:
		return SessionEndedV3{Reason: reason}
	case EndIdleExpired:
		return SessionEndedV4{Reason: reason}
	}
	return SessionEnded{Reason: reason}
}

// LowestChildCompleted is child.completed's body at the lowest data
// version that expresses d and e: version 2 only with an error.
func LowestChildCompleted(d ChildCompleted, e *ChildError) EventBody {
	if e == nil {
		return d
	}
	return ChildCompletedV2{Handle: d.Handle, ChildSessionID: d.ChildSessionID, TurnID: d.TurnID, Outcome: d.Outcome, Error: e}
}

// ChildErrorOf reads the runtime's error from a failed child.result's
// error text: "<code>: <message>" with a code of a failed delegation
// (child_unavailable, child_gone), as the runtime writes it; nil for any
// other text (a child's own failed step).
func ChildErrorOf(outcome, text string) *ChildError {
	if outcome != ChildFailed {
		return nil
	}
	for _, code := range []string{CodeChildUnavailable, CodeChildGone} {
		if msg, ok := strings.CutPrefix(text, code+": "); ok {
			return &ChildError{Code: code, Message: msg}
		}
	}
	return nil
}

// ChildErrorText is how a failed delegation's error reads in a
// child.result: "<code>: <message>" (ChildErrorOf reads it back).
func ChildErrorText(code, message string) string { return code + ": " + message }

// LowestHandoffSkipped is handoff.skipped's body at the lowest data
// version that expresses d: version 2 only for reason child.
func LowestHandoffSkipped(d HandoffSkipped) EventBody {
	if d.Reason == SkipChild {
		return HandoffSkippedV2(d)
	}
	return d
}

// NewBodyEvent builds an event of b's kind at b's data version (its data
// is b in its type's field order).
func NewBodyEvent(b EventBody) (Event, error) {
	return newEventV(b.EventKind(), DataVersionOf(b), b)
}
