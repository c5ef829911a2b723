package runtime

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/baton-rt/baton/wire"
)

// fold commits a finished step's result into the open turn.
func (m *Machine) fold(d *StepDone) {
	t, r := m.snap.Turn, m.validate(d.Result)
	if m.retryStep(t, r) {
		return
	}
	m.retry = nil
	t.Steps++
	t.Inputs = nil
	m.recordCalls(t, d.Calls)
	m.addUsage(t, r.Usage)
	if r.Error == "" {
		if code, err := m.checkChildren(t, r); err != nil {
			r = StepResult{Error: err.Error(), Code: code, Fatal: r.Fatal}
		}
	}
	if r.Error != "" {
		m.failStep(t, r)
		return
	}
	for _, e := range r.Events {
		m.st.events = append(m.st.events, Event{Kind: e.Kind, Data: e.Data})
	}
	m.collectOutputs(t, r.Events)
	m.snap.History = append(m.snap.History, cloneEntries(r.History)...)
	if r.State != nil {
		m.snap.State = slices.Clone(r.State)
	}
	m.addAliases(r.Aliases)
	m.emit(wire.TurnStep{TurnID: t.ID, Step: uint64(t.Steps)})
	waits := m.applyChildren(t, r)
	if r.Outcome != OutcomeFinish {
		if hit, ok := m.limitHit(t, r.Outcome, waits); ok {
			m.limitReached(t, hit)
			return
		}
	}
	if waits {
		t.Open = false // parked until the child's result
		return
	}
	m.outcome(t, r)
}

// addUsage adds a step's usage to its turn's and the session's.
func (m *Machine) addUsage(t *Turn, u Usage) {
	if u == (Usage{}) {
		return
	}
	t.Usage = t.Usage.Add(u)
	m.snap.Usage = m.snap.Usage.Add(u)
	m.st.dirty = true
}

// limitHit reports the first limit the turn has reached after a step whose
// agent asked for outcome: the session's tokens, the turn's tokens, or its
// steps when the outcome would run another step.
func (m *Machine) limitHit(t *Turn, o Outcome, waits bool) (wire.LimitReached, bool) {
	l := m.cfg.Limits
	if hit, ok := m.sessionLimitHit(t); ok {
		return hit, true
	}
	if used := t.Usage.Tokens(); l.MaxTokensPerTurn > 0 && used >= l.MaxTokensPerTurn {
		return wire.LimitReached{TurnID: t.ID, Limit: wire.LimitTokensPerTurn, Used: used, Max: l.MaxTokensPerTurn}, true
	}
	another := o == OutcomeContinue || o == OutcomeInput || o == OutcomeAuthorize || waits
	if max := l.MaxStepsPerTurn; another && max > 0 && t.Steps >= max {
		return wire.LimitReached{TurnID: t.ID, Limit: wire.LimitStepsPerTurn, Used: int64(t.Steps), Max: int64(max)}, true
	}
	return wire.LimitReached{}, false
}

func (m *Machine) sessionLimitHit(t *Turn) (wire.LimitReached, bool) {
	max := m.cfg.Limits.MaxTokensPerSession
	if used := m.snap.Usage.Tokens(); max > 0 && used >= max {
		return wire.LimitReached{TurnID: t.ID, Limit: wire.LimitTokensPerSession, Used: used, Max: max}, true
	}
	return wire.LimitReached{}, false
}

// limitReached records the limit and ends the turn: what the agent asked
// for (another step, a wait, a task) is not done.
func (m *Machine) limitReached(t *Turn, hit wire.LimitReached) {
	m.emit(hit)
	m.endTurn(t, wire.StopLimit)
}

// validate turns an illegal result into a failed step.
func (m *Machine) validate(r StepResult) StepResult {
	for _, e := range r.Events {
		if !m.kinds[e.Kind] {
			// A failed step's usage still counts (R4).
			return StepResult{Error: fmt.Sprintf("%v: %q", ErrEventKind, e.Kind), Code: CodeEventInvalid, Fatal: r.Fatal, Usage: r.Usage}
		}
	}
	if r.Fatal && r.Error == "" {
		r.Error = "fatal step failure"
	}
	switch r.Outcome {
	case OutcomeContinue, OutcomeDone, OutcomeInput, OutcomeAuthorize, OutcomeTask, OutcomeFinish:
	default:
		if r.Error == "" {
			r.Error, r.Code = fmt.Sprintf("%v: %q", ErrOutcome, r.Outcome), CodeResultInvalid
		}
	}
	return r
}

// failStep records the error; the turn ends with stop reason error (or
// the session ends, if fatal).
func (m *Machine) failStep(t *Turn, r StepResult) {
	m.emit(wire.ErrorData{Message: r.Error, Code: r.Code, TurnID: t.ID, Step: uint64(t.Steps)})
	if r.Fatal {
		m.reportTurn(t, wire.ChildFailed, r.Error, EndFailed)
		m.finalize(EndFailed)
		return
	}
	m.reportTurn(t, wire.ChildFailed, r.Error, "")
	m.endTurn(t, wire.StopError)
}

func (m *Machine) addAliases(aliases []string) {
	for _, a := range aliases {
		if a != "" && !slices.Contains(m.snap.Aliases, a) {
			m.snap.Aliases = append(m.snap.Aliases, a)
			m.st.after = append(m.st.after, ClaimAlias{Token: a})
		}
	}
}

// outcome applies what the agent asked for after the step.
func (m *Machine) outcome(t *Turn, r StepResult) {
	key := t.ID + "-" + itoa(t.Steps)
	if r.Fatal && r.Error == "" {
		r.Error = "fatal step failure"
	}
	switch r.Outcome {
	case OutcomeContinue:
		t.Open = true
	case OutcomeDone:
		m.completeTurn(t)
	case OutcomeInput:
		m.waitInput(t, cmp.Or(r.RequestID, key+"-input"), r.Question)
	case OutcomeAuthorize:
		m.waitAuth(t, cmp.Or(r.AttemptID, key+"-auth"))
	case OutcomeTask:
		m.startTask(r.Task, key+"-task")
		m.completeTurn(t)
	case OutcomeFinish:
		m.emit(turnCompleted(t, wire.StopDone))
		m.reportTurn(t, wire.ChildDone, "", EndDone)
		m.snap.Turn = nil
		m.finalize(EndDone)
	}
}

func (m *Machine) completeTurn(t *Turn) { m.endTurn(t, wire.StopDone) }

// endTurn completes the turn for reason; the session waits for a message.
func (m *Machine) endTurn(t *Turn, reason string) {
	m.reportTurn(t, wire.ChildDone, "", "")
	m.snap.Turn = nil
	m.closeToolCalls(ToolNotRun)
	m.emit(turnCompleted(t, reason))
	m.emit(wire.SessionWaiting{Reason: wire.WaitMessage})
}

// turnCompleted is turn.completed at the lowest data version that
// expresses reason (3 for error).
func turnCompleted(t *Turn, reason string) wire.EventBody {
	return wire.LowestTurnCompleted(wire.TurnCompletedV2{TurnID: t.ID, StopReason: reason, Usage: t.Usage})
}

func (m *Machine) waitInput(t *Turn, id, question string) {
	t.Open = false
	m.snap.Waits.Input = &InputWait{RequestID: id, Question: question}
	m.emit(wire.InputRequested{RequestID: id, Question: question})
	m.reportWait(t, id, "", question, false)
}

func (m *Machine) waitAuth(t *Turn, id string) {
	t.Open = false
	m.snap.Waits.Auth = &AuthWait{AttemptID: id}
	m.emit(wire.AuthRequested{AttemptID: id})
	m.reportWait(t, "", id, "", false)
}

func (m *Machine) startTask(spec *TaskSpec, id string) {
	s := TaskSpec{}
	if spec != nil {
		s = *spec
	}
	s.ID = cmp.Or(s.ID, id)
	m.snap.Waits.Tasks = append(m.snap.Waits.Tasks, Task{ID: s.ID, Duration: s.Duration, Kind: s.Kind, Input: slices.Clone(s.Input)})
	m.emit(wire.TaskStarted{TaskID: s.ID})
	m.st.after = append(m.st.after, StartTask{Task: s})
}
