package runtime

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// Failure codes of a failed step: the code of its "error" event.
const (
	CodeEventInvalid  = wire.CodeEventInvalid
	CodeEventTooLarge = wire.CodeEventTooLarge
	CodeResultInvalid = wire.CodeResultInvalid
	CodeAgentPanic    = wire.CodeAgentPanic
	CodeStepTimeout   = wire.CodeStepTimeout
	// CodeNondeterministic fails a re-run that asked for another journaled
	// call than the recorded one (see [StepInput.Do]).
	CodeNondeterministic = wire.CodeNondeterministic
	// CodeJournalUnavailable fails a step whose journal could not be read
	// or written.
	CodeJournalUnavailable = wire.CodeJournalUnavailable
	// Codes of a remote agent's steps (owner.RemoteAgent): its worker went
	// silent, no worker answered in time, the request could not be sent.
	CodeAgentTimeout         = wire.CodeAgentTimeout
	CodeAgentUnavailable     = wire.CodeAgentUnavailable
	CodeAgentRequestTooLarge = wire.CodeAgentRequestTooLarge
	// CodeAgentRetryable fails the step of an in-process agent whose error
	// was wrapped with [Retryable]; the step runs again under the
	// deployment's [RetryPolicy].
	CodeAgentRetryable = wire.CodeAgentRetryable
)

// Bounds of a step result's fields besides its events and state (those are
// wire's limits).
const (
	MaxStepIDBytes       = 64        // RequestID, AttemptID, Task.ID
	MaxQuestionBytes     = 4 << 10   // Question
	MaxTaskKindBytes     = 64        // Task.Kind
	MaxTaskInputBytes    = 256 << 10 // stored out of line in the checkpoint over wire.MaxInlineTextBytes
	MaxStepAliases       = 16
	MaxErrorMessageBytes = 2 << 10             // an error event's message (longer is cut)
	MaxStepHistory       = 256                 // history entries one step appends
	MaxStepHistoryBytes  = wire.MaxOutputBytes // as long as a message.output
)

// Checker validates what an agent returns before the machine folds it: the
// result is checked completely (outcome and its fields, every event's kind,
// data and size, the step's total event data, state, aliases), so an
// invalid result costs one failed step and nothing it holds reaches the
// session. It is pure and safe for concurrent use.
type Checker struct {
	reg   *wire.EventRegistry
	kinds map[string]bool
}

// NewChecker returns a checker for an agent that emits message.output and
// agentKinds (reserved built-in kinds are refused whatever agentKinds
// says), validating data against reg (nil: the built-ins only).
func NewChecker(reg *wire.EventRegistry, agentKinds []string) *Checker {
	if reg == nil {
		reg = wire.DefaultEvents()
	}
	kinds := map[string]bool{EventMessageOutput: true}
	for _, k := range agentKinds {
		if !Reserved(k) {
			kinds[k] = true
		}
	}
	return &Checker{reg: reg, kinds: kinds}
}

// Check returns r unchanged when it is valid, and otherwise a failed step:
// Error set to a readable message and Code to the failure's code. An
// agent's own error (r.Error, r.Fatal) passes through, its message cut to
// MaxErrorMessageBytes.
func (c *Checker) Check(r StepResult) StepResult {
	if r.Error != "" || r.Fatal {
		f := StepResult{Error: cut(cmp.Or(r.Error, "fatal step failure")), Code: r.Code, Fatal: r.Fatal}
		if r.Usage.Validate() == nil {
			f.Usage = r.Usage // what the failed step consumed still counts
		}
		return f
	}
	if err := checkOutcome(r); err != nil {
		return Failed(CodeResultInvalid, err)
	}
	if code, err := c.checkEvents(r.Events); err != nil {
		return Failed(code, err)
	}
	if err := checkState(r.State); err != nil {
		return Failed(CodeResultInvalid, err)
	}
	if err := checkAliases(r.Aliases); err != nil {
		return Failed(CodeResultInvalid, err)
	}
	if err := checkHistory(r.History); err != nil {
		return Failed(CodeResultInvalid, err)
	}
	if err := r.Usage.Validate(); err != nil {
		return Failed(CodeResultInvalid, err)
	}
	return r
}

// checkHistory: an agent appends assistant and tool entries only, each
// valid in wire's structured shape, at most MaxStepHistory of them and
// MaxStepHistoryBytes in all.
func checkHistory(es []Entry) error {
	if len(es) > MaxStepHistory {
		return fmt.Errorf("%d history entries in one step, limit %d", len(es), MaxStepHistory)
	}
	total := 0
	for i, e := range es {
		if e.Role != RoleAssistant && e.Role != RoleTool {
			return fmt.Errorf("history entry %d: role %q: an agent appends assistant and tool entries", i, e.Role)
		}
		if e.Kind != "" {
			return fmt.Errorf("history entry %d: kind %q is the runtime's", i, e.Kind)
		}
		if err := wire.ValidateEntry(e.Wire()); err != nil {
			return fmt.Errorf("history entry %d: %w", i, err)
		}
		b, _ := json.Marshal(e)
		total += len(b)
	}
	if total > MaxStepHistoryBytes {
		return fmt.Errorf("the step's history entries hold %d bytes, limit %d", total, MaxStepHistoryBytes)
	}
	return nil
}

// Failed is the result of a step that failed with code: an error event
// {code, message}, the turn ends, the session continues.
func Failed(code string, err error) StepResult {
	return StepResult{Error: cut(err.Error()), Code: code}
}

func checkOutcome(r StepResult) error {
	switch r.Outcome {
	case OutcomeContinue, OutcomeDone, OutcomeInput, OutcomeAuthorize, OutcomeTask, OutcomeFinish:
	default:
		return fmt.Errorf("%w: %q", ErrOutcome, r.Outcome)
	}
	if err := fieldFor(r.Outcome, OutcomeInput, r.Question != "" || r.RequestID != "", "question and requestId"); err != nil {
		return err
	}
	if err := fieldFor(r.Outcome, OutcomeAuthorize, r.AttemptID != "", "attemptId"); err != nil {
		return err
	}
	if err := fieldFor(r.Outcome, OutcomeTask, r.Task != nil, "task"); err != nil {
		return err
	}
	if err := errors.Join(bounded("requestId", r.RequestID, MaxStepIDBytes), bounded("attemptId", r.AttemptID, MaxStepIDBytes),
		bounded("question", r.Question, MaxQuestionBytes)); err != nil {
		return err
	}
	return checkTask(r.Task)
}

// fieldFor refuses a field set for another outcome than its own.
func fieldFor(got, own Outcome, set bool, name string) error {
	if set && got != own {
		return fmt.Errorf("%s set with outcome %q (only with %q)", name, got, own)
	}
	return nil
}

func checkTask(t *TaskSpec) error {
	if t == nil {
		return nil
	}
	if t.Duration < 0 {
		return errors.New("task duration is negative")
	}
	if len(t.Input) > 0 && !json.Valid(t.Input) {
		return errors.New("task input is not JSON")
	}
	return errors.Join(bounded("task id", t.ID, MaxStepIDBytes), bounded("task kind", t.Kind, MaxTaskKindBytes),
		bounded("task input", string(t.Input), MaxTaskInputBytes))
}

func bounded(name, v string, limit int) error {
	switch {
	case len(v) > limit:
		return fmt.Errorf("%s is %d bytes, limit %d", name, len(v), limit)
	case !utf8.ValidString(v):
		return fmt.Errorf("%s is not valid UTF-8", name)
	}
	return nil
}

// checkEvents checks each event and the step's total.
func (c *Checker) checkEvents(events []Event) (string, error) {
	if len(events) > wire.MaxStepEvents {
		return CodeEventTooLarge, fmt.Errorf("%d events in one step, limit %d", len(events), wire.MaxStepEvents)
	}
	total := 0
	for i, e := range events {
		n, code, err := c.checkEvent(e)
		if err != nil {
			return code, fmt.Errorf("event %d (%s): %w", i, e.Kind, err)
		}
		total += n
	}
	if total > wire.MaxStepEventBytes {
		return CodeEventTooLarge, fmt.Errorf("the step's events hold %d bytes of data, limit %d", total, wire.MaxStepEventBytes)
	}
	return "", nil
}

// checkEvent validates one event and returns the bytes it will take in the
// outbox (a long message.output text counts as its reference).
func (c *Checker) checkEvent(e Event) (int, string, error) {
	if !c.kinds[e.Kind] {
		return 0, CodeEventInvalid, fmt.Errorf("%w: %q is not a kind this agent emits", ErrEventKind, e.Kind)
	}
	if e.Kind == EventMessageOutput {
		return checkOutput(e.Data)
	}
	if err := c.reg.ValidateData(e.Kind, e.Data); err != nil {
		if errors.Is(err, wire.ErrTooLarge) {
			return 0, CodeEventTooLarge, err
		}
		return 0, CodeEventInvalid, err
	}
	return len(e.Data), "", nil
}

// refBytes is what an out-of-line message.output takes in the outbox.
const refBytes = 160

// checkOutput validates a message.output: {"turnId"?, "text"} with a
// non-empty text, which the runtime stores out of line when it is longer
// than wire.MaxInlineTextBytes. A ref is the runtime's, never the agent's.
func checkOutput(data json.RawMessage) (int, string, error) {
	out, err := wire.DecodeData[wire.MessageOutput](wire.Event{Kind: EventMessageOutput, V: 1, Data: data})
	switch {
	case len(data) == 0:
		return 0, CodeEventInvalid, errors.New("message.output has no data")
	case err != nil:
		return 0, CodeEventInvalid, err
	case out.Ref != nil:
		return 0, CodeEventInvalid, errors.New("message.output ref is set by the runtime, not the agent")
	case out.Text == "":
		return 0, CodeEventInvalid, errors.New("message.output text is empty")
	case len(out.Text) > wire.MaxOutputBytes:
		return 0, CodeEventTooLarge, fmt.Errorf("message.output text is %d bytes, limit %d", len(out.Text), wire.MaxOutputBytes)
	case !utf8.ValidString(out.Text):
		return 0, CodeEventInvalid, errors.New("message.output text is not valid UTF-8")
	case len(out.Text) > wire.MaxInlineTextBytes:
		return refBytes + len(out.TurnID), "", nil
	}
	return len(data), "", nil
}

func checkState(state json.RawMessage) error {
	switch {
	case state == nil:
		return nil
	case len(state) > wire.MaxStateBytes:
		return fmt.Errorf("state is %d bytes, limit %d", len(state), wire.MaxStateBytes)
	case !json.Valid(state):
		return errors.New("state is not valid JSON")
	}
	return nil
}

func checkAliases(aliases []string) error {
	if len(aliases) > MaxStepAliases {
		return fmt.Errorf("%d aliases in one step, limit %d", len(aliases), MaxStepAliases)
	}
	for _, a := range aliases {
		if a == "" {
			continue // ignored by the machine
		}
		if _, err := subjects.EncodeToken(a); err != nil {
			return fmt.Errorf("alias %q: %w", a, err)
		}
	}
	return nil
}

// cut bounds an error message, on a rune boundary.
func cut(s string) string {
	if len(s) <= MaxErrorMessageBytes {
		return s
	}
	s = s[:MaxErrorMessageBytes]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
