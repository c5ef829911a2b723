package wire

import "errors"

// The events of subagents (child.go declares their data types): the
// parent-side kinds child.started, child.completed, child.waiting and
// child.closed (data version 1), session.ended's data version 3 (reason
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
// for terminated, 3 for closed.
func LowestSessionEnded(reason string) EventBody {
	switch reason {
	case EndTerminated:
		return SessionEndedV2{Reason: reason}
	case EndClosed:
		return SessionEndedV3{Reason: reason}
	}
	return SessionEnded{Reason: reason}
}

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
