package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"
)

// Agent is user code: one bounded step per call. The driver calls Step with
// the input of a [RunStep] effect and a context that is cancelled when the
// machine emits [CancelStep]. Step must be deterministic in its durable
// result for a given input, and must not keep state outside StepResult.State.
type Agent interface {
	// EventKinds lists the event kinds the agent emits besides
	// message.output. It is fixed for a deployment.
	EventKinds() []string
	// Step runs one step. A returned error fails the step (an error event,
	// the turn ends, the session continues).
	Step(ctx context.Context, in StepInput) (StepResult, error)
}

// StepInput is what one step sees: committed state plus the admitted inputs.
// Each delivery in Inputs carries its Payloads as the channel sent them
// (message text and image or file parts, context, outputSchema, ext);
// Text is their messages' text joined with newlines.
type StepInput struct {
	SessionID string          `json:"sessionId"`
	TurnID    string          `json:"turnId"`
	Step      int             `json:"step"` // 1-based within the turn
	Caller    string          `json:"caller,omitempty"`
	State     json.RawMessage `json:"state,omitempty"`
	History   []Entry         `json:"history,omitempty"`
	Inputs    []Command       `json:"inputs,omitempty"`
}

// Key is the step's stable identity (<turnID>/<step>), for execution logs.
func (in StepInput) Key() string { return in.TurnID + "/" + strconv.Itoa(in.Step) }

// Outcome is what the agent wants after a step.
type Outcome string

// Outcomes.
const (
	OutcomeContinue  Outcome = "continue"  // another step in this turn
	OutcomeDone      Outcome = "done"      // the turn is complete
	OutcomeInput     Outcome = "input"     // wait for human input
	OutcomeAuthorize Outcome = "authorize" // wait for an authorization callback
	OutcomeTask      Outcome = "task"      // start a background task; the turn is complete
	OutcomeFinish    Outcome = "finish"    // the session is done
)

// StepResult is the outcome of one step.
type StepResult struct {
	Outcome Outcome         `json:"outcome"`
	Events  []Event         `json:"events,omitempty"` // message.output and registered kinds
	State   json.RawMessage `json:"state,omitempty"`  // nil keeps the state
	Aliases []string        `json:"aliases,omitempty"`
	// History are the agent's own entries, appended to the session's
	// history when the step commits: assistant entries (with any tool
	// calls) and tool entries (tool results). The runtime appends the
	// entries of the commands it admits itself (see [Entry]).
	History []Entry `json:"history,omitempty"`
	// Usage is what the step consumed (all members optional): summed per
	// turn (turn.completed's usage) and per session (the status's), and
	// held to the token limits. A failed step's usage counts too.
	Usage Usage `json:"usage,omitzero"`

	Question  string    `json:"question,omitempty"`  // OutcomeInput
	RequestID string    `json:"requestId,omitempty"` // OutcomeInput; derived if empty
	AttemptID string    `json:"attemptId,omitempty"` // OutcomeAuthorize; derived if empty
	Task      *TaskSpec `json:"task,omitempty"`      // OutcomeTask

	// Delegate hands a message to a child session through a handle, after
	// the step commits (see [Delegate]); the outcome is then continue or
	// done. Close closes handles: their children end (session.ended
	// {reason: closed}) and the names may be reused.
	Delegate *Delegate `json:"delegate,omitempty"`
	Close    []string  `json:"close,omitempty"`

	// Error fails the step: its events and state are dropped, an error event
	// is recorded and the turn ends. Fatal also ends the session (failed).
	Error string `json:"error,omitempty"`
	Fatal bool   `json:"fatal,omitempty"`
	// Code is the machine-readable code of a failed step (the code of its
	// error event), set by the runtime for a result it refused (see
	// [Checker]), a panic or a timeout; empty for the agent's own errors.
	Code string `json:"code,omitempty"`
}

// TaskSpec is a background task the driver runs after the commit. ID is
// derived from the step when empty.
type TaskSpec struct {
	ID       string          `json:"id"`
	Kind     string          `json:"kind,omitempty"`
	Duration time.Duration   `json:"duration,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
}

// Run calls a.Step for one [RunStep] input and returns the [StepDone] to feed
// back. An agent error becomes a failed step (StepResult.Error; code
// agent_retryable if it was marked with [Retryable]). A panic in
// Step is recovered: the step fails with code agent_panic, and the panic
// value and stack are returned as a *PanicError for the caller to log.
func Run(ctx context.Context, a Agent, in StepInput) (d StepDone, perr *PanicError) {
	d = StepDone{TurnID: in.TurnID, Step: in.Step}
	defer func() {
		if p := recover(); p != nil {
			perr = &PanicError{Value: p, Stack: debug.Stack()}
			d.Result = Failed(CodeAgentPanic, perr)
		}
	}()
	r, err := a.Step(ctx, in)
	if err != nil {
		r = StepResult{Error: err.Error()}
		if IsRetryable(err) {
			r.Code = CodeAgentRetryable
		}
	}
	d.Result = r
	return d, nil
}

// PanicError is a panic recovered from agent code, with its stack.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("agent panic: %v", e.Value) }
