package runtime

import (
	"fmt"
	"slices"

	"github.com/baton-rt/baton/wire"
)

// fold commits a finished step's result into the open turn.
func (m *Machine) fold(d *StepDone) {
	t, r := m.snap.Turn, m.validate(d.Result)
	t.Steps++
	t.Inputs = nil
	if r.Error != "" {
		m.failStep(t, r)
		return
	}
	for _, e := range r.Events {
		m.st.events = append(m.st.events, Event{Kind: e.Kind, Data: e.Data})
		m.rememberOutput(e)
	}
	if r.State != nil {
		m.snap.State = slices.Clone(r.State)
	}
	m.addAliases(r.Aliases)
	m.emit(wire.TurnStep{TurnID: t.ID, Step: uint64(t.Steps)})
	m.outcome(t, r)
}

// validate turns an illegal result into a failed step.
func (m *Machine) validate(r StepResult) StepResult {
	for _, e := range r.Events {
		if !m.kinds[e.Kind] {
			return StepResult{Error: fmt.Sprintf("%v: %q", ErrEventKind, e.Kind), Code: CodeEventInvalid, Fatal: r.Fatal}
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

// failStep records the error; the turn ends (or the session, if fatal).
func (m *Machine) failStep(t *Turn, r StepResult) {
	m.emit(wire.ErrorData{Message: r.Error, Code: r.Code, TurnID: t.ID, Step: uint64(t.Steps)})
	if r.Fatal {
		m.finalize(EndFailed)
		return
	}
	m.completeTurn(t)
}

func (m *Machine) rememberOutput(e Event) {
	if e.Kind != EventMessageOutput {
		return
	}
	var body struct {
		Text string `json:"text"`
	}
	_ = jsonUnmarshal(e.Data, &body)
	m.snap.History = append(m.snap.History, Entry{Role: "agent", Text: body.Text})
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
		m.waitInput(t, or(r.RequestID, key+"-input"), r.Question)
	case OutcomeAuthorize:
		m.waitAuth(t, or(r.AttemptID, key+"-auth"))
	case OutcomeTask:
		m.startTask(r.Task, key+"-task")
		m.completeTurn(t)
	case OutcomeFinish:
		m.emit(wire.TurnCompleted{TurnID: t.ID})
		m.snap.Turn = nil
		m.finalize(EndDone)
	}
}

func (m *Machine) completeTurn(t *Turn) {
	m.snap.Turn = nil
	m.emit(wire.TurnCompleted{TurnID: t.ID})
	m.emit(wire.SessionWaiting{Reason: wire.WaitMessage})
}

func (m *Machine) waitInput(t *Turn, id, question string) {
	t.Open = false
	m.snap.Waits.Input = &InputWait{RequestID: id, Question: question}
	m.emit(wire.InputRequested{RequestID: id, Question: question})
}

func (m *Machine) waitAuth(t *Turn, id string) {
	t.Open = false
	m.snap.Waits.Auth = &AuthWait{AttemptID: id}
	m.emit(wire.AuthRequested{AttemptID: id})
}

func (m *Machine) startTask(spec *TaskSpec, id string) {
	s := TaskSpec{}
	if spec != nil {
		s = *spec
	}
	s.ID = or(s.ID, id)
	m.snap.Waits.Tasks = append(m.snap.Waits.Tasks, Task{ID: s.ID, Duration: s.Duration})
	m.emit(wire.TaskStarted{TaskID: s.ID})
	m.st.after = append(m.st.after, StartTask{Task: s})
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
