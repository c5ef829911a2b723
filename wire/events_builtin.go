package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Built-in event kinds.
const (
	EventSessionStarted   = "session.started"
	EventCommandApplied   = "command.applied"
	EventCommandRejected  = "command.rejected"
	EventTurnStarted      = "turn.started"
	EventTurnStep         = "turn.step"
	EventTurnStepRetried  = "turn.step_retried"
	EventMessageOutput    = "message.output"
	EventInputRequested   = "input.requested"
	EventAuthRequested    = "auth.requested"
	EventTaskStarted      = "task.started"
	EventTaskCompleted    = "task.completed"
	EventTurnCompleted    = "turn.completed"
	EventTurnCancelled    = "turn.cancelled"
	EventSessionWaiting   = "session.waiting"
	EventSessionPaused    = "session.paused"
	EventSessionResumed   = "session.resumed"
	EventSessionTagged    = "session.tagged"
	EventHandoffStarted   = "handoff.started"
	EventHandoffSkipped   = "handoff.skipped"
	EventHandoffCompleted = "handoff.completed"
	EventHandoffFailed    = "handoff.failed"
	EventWaitCancelled    = "wait.cancelled"
	EventStepInterrupted  = "step.interrupted"
	EventWireRejected     = "wire.rejected"
	EventSessionEnded     = "session.ended"
	EventErrorKind        = "error" // ("EventError" is the typed error)
	EventLimitReached     = "limit.reached"

	// Appended outside any owner's commit (docs/driver.md, "Quarantine").
	EventSessionQuarantined = "session.quarantined"
	EventSessionRetried     = "session.retried"
)

// Reasons and enumerations used by built-in event data.
const (
	EndDone      = "done"
	EndExpired   = "expired"
	EndFailed    = "failed"
	EndCancelled = "cancelled"
	// EndTerminated: an operator ended a quarantined session (data version
	// 2 of session.ended).
	EndTerminated = "terminated"

	SkipBusy          = "busy"
	SkipQueued        = "queued"
	SkipInput         = "input"
	SkipAuthorization = "authorization"
	SkipTask          = "task"
	SkipPaused        = "paused"

	// Stop reasons of turn.completed (data version 2).
	StopDone  = "done"
	StopLimit = "limit"
	// StopError: a failed step ended the turn (data version 3).
	StopError = "error"

	// Limits of limit.reached.
	LimitStepsPerTurn     = "steps_per_turn"
	LimitTokensPerTurn    = "tokens_per_turn"
	LimitTokensPerSession = "tokens_per_session"

	WaitMessage       = "message"
	WaitInput         = "input"
	WaitAuthorization = "authorization"
	WaitTask          = "task"
)

// Codes of "error" events for a failed step (ErrorData.Code). An agent's own
// error (a returned error or StepResult.Error) has no code.
const (
	CodeEventInvalid  = "event_invalid"   // an event's kind is not the agent's, or its data fails its schema
	CodeEventTooLarge = "event_too_large" // an event, or all of one step's events, over the limits
	CodeResultInvalid = "result_invalid"  // the step result itself: outcome, state, aliases, fields
	CodeAgentPanic    = "agent_panic"     // the agent panicked in Step
	CodeStepTimeout   = "step_timeout"    // the step ran past its timeout
	// CodeNondeterministic: a re-run asked for another journaled call than
	// the one recorded at a position (runtime.StepInput.Do).
	CodeNondeterministic = "nondeterministic_step"
	// CodeJournalUnavailable: the step's journal could not be read or
	// written (the store unreachable past its retries).
	CodeJournalUnavailable = "journal_unavailable"
	// CodeAgentTimeout: a remote agent's worker took the step and then went
	// silent past the heartbeat timeout (it died, or lost its connection).
	CodeAgentTimeout = "agent_timeout"
	// CodeAgentUnavailable: no worker of the deployment answered the step
	// request within the unavailability window.
	CodeAgentUnavailable = "agent_unavailable"
	// CodeAgentRequestTooLarge: a remote step's request could not be made
	// to fit the server's max_payload even with its parts sent by
	// reference.
	CodeAgentRequestTooLarge = "agent_request_too_large"
	// CodeAgentRetryable: an in-process agent's step returned an error it
	// marked retryable (runtime.Retryable): a transient failure.
	CodeAgentRetryable = "agent_retryable"
)

// CommandRef names an inbox command by ID and inbox stream sequence.
type CommandRef struct {
	CommandID string `json:"commandId" jsonschema:"minLength=1"`
	Seq       uint64 `json:"seq" jsonschema:"minimum=1"`
}

// SessionStarted: a session was created with its initial addresses (raw).
type SessionStarted struct {
	SessionID    string   `json:"sessionId" jsonschema:"minLength=1"`
	DeploymentID string   `json:"deploymentId" jsonschema:"minLength=1"`
	Tokens       []string `json:"tokens,omitempty"`
	Caller       string   `json:"caller,omitempty"`
}

// CommandApplied is emitted once for every applied command, so exactly-once
// is checkable from outside.
type CommandApplied struct {
	CommandID string `json:"commandId" jsonschema:"minLength=1"`
	Seq       uint64 `json:"seq" jsonschema:"minimum=1"`
	Kind      string `json:"kind" jsonschema:"minLength=1"`
}

// TurnStarted: turn TurnID started (for Caller), triggered by CommandID if any.
type TurnStarted struct {
	TurnID    string `json:"turnId" jsonschema:"minLength=1"`
	Caller    string `json:"caller,omitempty"`
	CommandID string `json:"commandId,omitempty"`
}

// TurnStep: a step of a turn was committed.
type TurnStep struct {
	TurnID string `json:"turnId" jsonschema:"minLength=1"`
	Step   uint64 `json:"step" jsonschema:"minimum=1"`
}

// MessageOutput is agent output: inline Text, or Ref to content stored out
// of line when it exceeds MaxEventDataBytes.
type MessageOutput struct {
	TurnID string   `json:"turnId,omitempty"`
	Text   string   `json:"text,omitempty"`
	Ref    *BlobRef `json:"ref,omitempty"`
}

// InputRequested: the agent waits for an input.response to RequestID.
type InputRequested struct {
	RequestID string `json:"requestId" jsonschema:"minLength=1"`
	Question  string `json:"question"`
}

// AuthRequested: the agent waits for an auth.callback for AttemptID.
type AuthRequested struct {
	AttemptID string `json:"attemptId" jsonschema:"minLength=1"`
	Provider  string `json:"provider,omitempty"`
	URL       string `json:"url,omitempty"`
}

// TaskStarted: a background task was started; its result returns as a
// task.result command.
type TaskStarted struct {
	TaskID string `json:"taskId" jsonschema:"minLength=1"`
	Name   string `json:"name,omitempty"`
}

// TaskCompleted: a task result was applied (Error set if it failed).
type TaskCompleted struct {
	TaskID string `json:"taskId" jsonschema:"minLength=1"`
	Error  string `json:"error,omitempty"`
}

// TaskCompletedV2 is data version 2 of task.completed: the task's kind
// and its result — inline (Result, any JSON) or, over MaxInlineTextBytes,
// stored out of line (ResultRef, resolved by the ingress for its readers)
// — or its error with a code when the runtime failed it (Code: one of
// the Task… codes). A reader of version 1 sees taskId and error.
type TaskCompletedV2 struct {
	TaskID    string          `json:"taskId" jsonschema:"minLength=1"`
	Kind      string          `json:"kind,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	ResultRef *BlobRef        `json:"resultRef,omitempty"`
	Error     string          `json:"error,omitempty"`
	Code      string          `json:"code,omitempty"`
}

// DataVersion is the data version a TaskCompletedV2 is recorded at.
func (TaskCompletedV2) DataVersion() int { return 2 }

// Codes of a task the runtime failed (task.completed's code). The runner
// reports them as the prefix "<code>: " of task.result's error, which
// TaskErrorCode reads back.
const (
	CodeTaskUnknownKind    = "unknown_task_kind"     // no handler for the task's kind on the deployment
	CodeTaskPanic          = "task_panic"            // the handler panicked
	CodeTaskResultTooLarge = "task_result_too_large" // the result is over MaxTaskResultBytes
	CodeTaskInvalidResult  = "task_invalid_result"   // the result is not JSON
)

// MaxTaskResultBytes bounds a task's result (it travels inline in the
// task.result command).
const MaxTaskResultBytes = 256 << 10

// TaskErrorCode is the runtime's code a task.result error starts with
// ("" for a handler's own error).
func TaskErrorCode(msg string) string {
	for _, c := range []string{CodeTaskUnknownKind, CodeTaskPanic, CodeTaskResultTooLarge, CodeTaskInvalidResult} {
		if strings.HasPrefix(msg, c+": ") {
			return c
		}
	}
	return ""
}

// TurnCompleted: turn TurnID settled.
type TurnCompleted struct {
	TurnID string `json:"turnId" jsonschema:"minLength=1"`
}

// TurnCompletedV2 is data version 2 of turn.completed: why the turn
// stopped (done: the agent completed it; limit: a limit ended it, after
// limit.reached) and the usage its steps reported. A turn a failed step
// ended is version 3 (TurnCompletedV3, LowestTurnCompleted).
type TurnCompletedV2 struct {
	TurnID     string `json:"turnId" jsonschema:"minLength=1"`
	StopReason string `json:"stopReason" jsonschema:"enum=done,enum=limit"`
	Usage      Usage  `json:"usage"`
}

// DataVersion is the data version a TurnCompletedV2 is recorded at.
func (TurnCompletedV2) DataVersion() int { return 2 }

// DataVersion is the data version a SessionEndedV2 is recorded at.
func (SessionEndedV2) DataVersion() int { return 2 }

// LimitReached: a limit ended turn TurnID: Limit (steps_per_turn,
// tokens_per_turn, tokens_per_session) has Used at or above Max.
type LimitReached struct {
	TurnID string `json:"turnId" jsonschema:"minLength=1"`
	Limit  string `json:"limit" jsonschema:"enum=steps_per_turn,enum=tokens_per_turn,enum=tokens_per_session"`
	Used   int64  `json:"used" jsonschema:"minimum=0"`
	Max    int64  `json:"max" jsonschema:"minimum=1"`
}

// TurnCancelled: turn TurnID was cancelled (by CommandID if any).
type TurnCancelled struct {
	TurnID    string `json:"turnId" jsonschema:"minLength=1"`
	CommandID string `json:"commandId,omitempty"`
}

// SessionWaiting: the session settled and waits for Reason (message, input,
// authorization, task).
type SessionWaiting struct {
	Reason string `json:"reason" jsonschema:"enum=message,enum=input,enum=authorization,enum=task"`
}

// SessionPaused: an operator paused the session.
type SessionPaused struct {
	CommandID string `json:"commandId,omitempty"`
}

// SessionResumed: an operator resumed the session.
type SessionResumed struct {
	CommandID string `json:"commandId,omitempty"`
}

// HandoffStarted: a handoff to TargetDeploymentID was staged for Trigger.
type HandoffStarted struct {
	HandoffID          string     `json:"handoffId" jsonschema:"minLength=1"`
	TargetDeploymentID string     `json:"targetDeploymentId"`
	Trigger            CommandRef `json:"trigger"`
}

// HandoffSkipped: a delivery from another deployment did not hand off.
type HandoffSkipped struct {
	Reason             string `json:"reason" jsonschema:"enum=busy,enum=queued,enum=input,enum=authorization,enum=task,enum=paused"`
	CommandID          string `json:"commandId" jsonschema:"minLength=1"`
	Seq                uint64 `json:"seq" jsonschema:"minimum=1"`
	DeploymentID       string `json:"deploymentId"`
	TargetDeploymentID string `json:"targetDeploymentId"`
}

// HandoffCompleted: the successor activated (Epoch is its fencing epoch).
type HandoffCompleted struct {
	HandoffID        string `json:"handoffId" jsonschema:"minLength=1"`
	FromDeploymentID string `json:"fromDeploymentId"`
	ToDeploymentID   string `json:"toDeploymentId"`
	Epoch            uint64 `json:"epoch" jsonschema:"minimum=1"`
}

// HandoffFailed: the handoff failed before activation; the source goes on.
type HandoffFailed struct {
	HandoffID          string `json:"handoffId" jsonschema:"minLength=1"`
	TargetDeploymentID string `json:"targetDeploymentId"`
	Reason             string `json:"reason" jsonschema:"minLength=1"`
}

// WaitCancelled: a pending wait (input, authorization, task) was cancelled.
type WaitCancelled struct {
	Wait      string `json:"wait" jsonschema:"enum=input,enum=authorization,enum=task"`
	RequestID string `json:"requestId,omitempty"`
	AttemptID string `json:"attemptId,omitempty"`
	TaskID    string `json:"taskId,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// StepInterrupted: an uncommitted step was abandoned (cancel, crash, fence).
type StepInterrupted struct {
	TurnID string `json:"turnId" jsonschema:"minLength=1"`
	Step   uint64 `json:"step" jsonschema:"minimum=1"`
	Reason string `json:"reason,omitempty"`
}

// WireRejected: the inbox command at Seq could not be decoded (wire.Error).
type WireRejected struct {
	Seq       uint64 `json:"seq" jsonschema:"minimum=1"`
	Reason    string `json:"reason" jsonschema:"minLength=1"`
	Version   int    `json:"version,omitempty" jsonschema:"minimum=0"`
	CommandID string `json:"commandId,omitempty"`
	Kind      string `json:"kind,omitempty"`
}

// SessionEnded: the session finished (done, expired, failed, cancelled).
// It is data version 1 of session.ended, written whenever the reason fits
// (NewSessionEnded).
type SessionEnded struct {
	Reason string `json:"reason" jsonschema:"enum=done,enum=expired,enum=failed,enum=cancelled"`
}

// SessionEndedV2 is data version 2 of session.ended: version 1's reasons
// plus terminated (an operator ended a quarantined session). A reader that
// knows only version 1 passes it through unchanged.
type SessionEndedV2 struct {
	Reason string `json:"reason" jsonschema:"enum=done,enum=expired,enum=failed,enum=cancelled,enum=terminated"`
}

// SessionQuarantined: the session was parked instead of booted after
// Attempts boot attempts that failed or died with their process; Error is
// the last error seen (process_died when the claimant vanished mid-boot or
// mid-step). No owner runs it until an operator retries or ends it.
type SessionQuarantined struct {
	Attempts     int    `json:"attempts" jsonschema:"minimum=1"`
	Error        string `json:"error" jsonschema:"minLength=1"`
	DeploymentID string `json:"deploymentId" jsonschema:"minLength=1"`
}

// SessionRetried: an operator retried a quarantined session on
// DeploymentID (its own, or the one that adopts it).
type SessionRetried struct {
	DeploymentID string `json:"deploymentId" jsonschema:"minLength=1"`
}

// NewSessionEnded builds a session.ended event at the lowest data version
// that expresses reason: 1 for done, expired, failed and cancelled, 2 for
// terminated, 3 for closed, 4 for idle_expired (LowestSessionEnded; an end
// with who and why is NewBodyEvent(LowestSessionEndedBy(…))).
func NewSessionEnded(reason string) (Event, error) {
	return NewBodyEvent(LowestSessionEnded(reason))
}

// ErrorData is the data of an "error" event.
type ErrorData struct {
	Message string `json:"message" jsonschema:"minLength=1"`
	Code    string `json:"code,omitempty"`
	TurnID  string `json:"turnId,omitempty"`
	Step    uint64 `json:"step,omitempty"`
}

// registerBuiltins adds every built-in kind to r.
func registerBuiltins(r *EventRegistry) error {
	return errors.Join(
		registerBuiltin(r, EventSessionStarted, func(d SessionStarted) error {
			return all(nonEmpty("sessionId", d.SessionID), nonEmpty("deploymentId", d.DeploymentID))
		}),
		registerBuiltin(r, EventCommandApplied, func(d CommandApplied) error {
			return all(nonEmpty("commandId", d.CommandID), positive("seq", d.Seq), nonEmpty("kind", d.Kind))
		}),
		registerCommandRejected(r),
		registerBusy(r),
		registerStepRetried(r),
		registerSessionTagged(r),
		registerBuiltin(r, EventTurnStarted, func(d TurnStarted) error { return nonEmpty("turnId", d.TurnID) }),
		registerBuiltin(r, EventTurnStep, func(d TurnStep) error { return all(nonEmpty("turnId", d.TurnID), positive("step", d.Step)) }),
		registerBuiltin(r, EventMessageOutput, validateMessageOutput),
		registerBuiltin(r, EventInputRequested, func(d InputRequested) error { return nonEmpty("requestId", d.RequestID) }),
		registerBuiltin(r, EventAuthRequested, func(d AuthRequested) error { return nonEmpty("attemptId", d.AttemptID) }),
		registerBuiltin(r, EventTaskStarted, func(d TaskStarted) error { return nonEmpty("taskId", d.TaskID) }),
		registerBuiltin(r, EventTaskCompleted, func(d TaskCompleted) error { return nonEmpty("taskId", d.TaskID) }),
		registerBuiltinV(r, EventTaskCompleted, 2, func(d TaskCompletedV2) error {
			if d.Result != nil && d.ResultRef != nil {
				return errors.New("result is inline or referenced, not both")
			}
			return nonEmpty("taskId", d.TaskID)
		}),
		registerBuiltin(r, EventTurnCompleted, func(d TurnCompleted) error { return nonEmpty("turnId", d.TurnID) }),
		registerBuiltin(r, EventLimitReached, func(d LimitReached) error {
			if d.Used < 0 || d.Max < 1 {
				return errors.New("used must be >= 0 and max >= 1")
			}
			return all(nonEmpty("turnId", d.TurnID),
				oneOf("limit", d.Limit, LimitStepsPerTurn, LimitTokensPerTurn, LimitTokensPerSession))
		}),
		registerBuiltin(r, EventTurnCancelled, func(d TurnCancelled) error { return nonEmpty("turnId", d.TurnID) }),
		registerBuiltin(r, EventSessionWaiting, func(d SessionWaiting) error {
			return oneOf("reason", d.Reason, WaitMessage, WaitInput, WaitAuthorization, WaitTask)
		}),
		registerBuiltin[SessionPaused](r, EventSessionPaused, nil),
		registerBuiltin[SessionResumed](r, EventSessionResumed, nil),
		registerBuiltin(r, EventHandoffStarted, func(d HandoffStarted) error {
			return all(nonEmpty("handoffId", d.HandoffID), validDeployment(d.TargetDeploymentID), d.Trigger.validate())
		}),
		registerBuiltin(r, EventHandoffSkipped, validateHandoffSkipped),
		registerBuiltin(r, EventHandoffCompleted, func(d HandoffCompleted) error {
			return all(nonEmpty("handoffId", d.HandoffID), validDeployment(d.FromDeploymentID),
				validDeployment(d.ToDeploymentID), positive("epoch", d.Epoch))
		}),
		registerBuiltin(r, EventHandoffFailed, func(d HandoffFailed) error {
			return all(nonEmpty("handoffId", d.HandoffID, d.Reason), validDeployment(d.TargetDeploymentID))
		}),
		registerBuiltin(r, EventWaitCancelled, func(d WaitCancelled) error {
			return oneOf("wait", d.Wait, WaitInput, WaitAuthorization, WaitTask)
		}),
		registerBuiltin(r, EventStepInterrupted, func(d StepInterrupted) error {
			return all(nonEmpty("turnId", d.TurnID), positive("step", d.Step))
		}),
		registerBuiltin(r, EventWireRejected, func(d WireRejected) error {
			if d.Version < 0 {
				return errors.New("version is negative")
			}
			return all(positive("seq", d.Seq), nonEmpty("reason", d.Reason))
		}),
		registerBuiltin(r, EventSessionEnded, func(d SessionEnded) error {
			return oneOf("reason", d.Reason, EndDone, EndExpired, EndFailed, EndCancelled)
		}),
		registerBuiltinV(r, EventSessionEnded, 2, func(d SessionEndedV2) error {
			return oneOf("reason", d.Reason, EndDone, EndExpired, EndFailed, EndCancelled, EndTerminated)
		}),
		registerBuiltin(r, EventErrorKind, func(d ErrorData) error { return nonEmpty("message", d.Message) }),
		registerChildEvents(r),
		registerSessionEndedV4(r),
		registerQuarantineEvents(r),
		registerTurnEvents(r),
	)
}

// registerBuiltin registers a built-in kind: its validate function states
// every constraint of its schema (equivalence_test.go holds it to that).
func registerBuiltin[T any](r *EventRegistry, kind string, validate func(T) error) error {
	return registerEvent(r, kind, 1, validate, true)
}

// registerBuiltinV registers data version v of a built-in kind (after
// version v-1).
func registerBuiltinV[T any](r *EventRegistry, kind string, v int, validate func(T) error) error {
	return registerEvent(r, kind, v, validate, true)
}

func validateMessageOutput(d MessageOutput) error {
	if (d.Text == "") == (d.Ref == nil) {
		return errors.New("exactly one of text and ref")
	}
	if d.Ref != nil {
		return d.Ref.Validate()
	}
	return nil
}

func validateHandoffSkipped(d HandoffSkipped) error {
	return all(
		oneOf("reason", d.Reason, SkipBusy, SkipQueued, SkipInput, SkipAuthorization, SkipTask, SkipPaused),
		validDeployment(d.TargetDeploymentID), nonEmpty("commandId", d.CommandID), positive("seq", d.Seq))
}

func (c CommandRef) validate() error {
	return all(nonEmpty("commandId", c.CommandID), positive("seq", c.Seq))
}

// all returns the first error.
func all(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func nonEmpty(name string, values ...string) error {
	if len(values) == 0 || slices.Contains(values, "") {
		return fmt.Errorf("%s is empty", name)
	}
	return nil
}

func positive(name string, n uint64) error {
	if n == 0 {
		return fmt.Errorf("%s must be positive", name)
	}
	return nil
}

func oneOf(name, v string, allowed ...string) error {
	if !slices.Contains(allowed, v) {
		return fmt.Errorf("%s %q is not one of %v", name, v, allowed)
	}
	return nil
}
