package runtime

import (
	"slices"
	"strconv"
)

// apply applies one command: its handoff.skipped record (if any), its one
// command.applied event, then its effect on the state.
func (m *Machine) apply(c Command) {
	if c.Rejected != "" {
		m.reject(c)
		return
	}
	m.markApplied(c)
	switch c.Kind {
	case KindDeliver:
		m.startTurn(c)
	case KindCancel:
		m.cancelTurn()
	case KindReset:
		m.reset()
	case KindClear, KindCompact:
		m.compact(c.Kind)
	case KindInputResponse, KindAuthCallback:
		m.answer(c)
	case KindTaskResult:
		m.taskResult(c)
	default:
		m.control(c)
	}
}

// control applies the operator and infrastructure kinds.
func (m *Machine) control(c Command) {
	switch c.Kind {
	case KindTimeout:
		if t := m.snap.Timer; t != nil && t.ID == c.TimerID {
			m.finalize(EndExpired)
		}
	case KindPause:
		m.setPaused(true, EventSessionPaused)
	case KindResume:
		m.setPaused(false, EventSessionResumed)
	}
	// move and unknown kinds: applied, no further effect.
}

func (m *Machine) markApplied(c Command) {
	if r, ok := m.skips[c.Seq]; ok {
		delete(m.skips, c.Seq)
		target, _ := m.handoffTarget(c)
		m.emit(EventHandoffSkipped, Fields{
			"reason": r, "commandId": c.ID, "seq": c.Seq,
			"deploymentId": m.cfg.Deployment, "targetDeploymentId": target,
		})
	}
	m.emit(EventCommandApplied, Fields{"commandId": c.ID, "seq": c.Seq, "kind": c.Kind})
	m.snap.Applied.add(c.Seq, c.ID, m.cfg.RecentIDs)
	m.st.applied = append(m.st.applied, Ref{Seq: c.Seq, ID: c.ID})
}

func (m *Machine) reject(c Command) {
	m.emit(EventWireRejected, Fields{"commandId": c.ID, "seq": c.Seq, "reason": c.Rejected})
	m.snap.Applied.add(c.Seq, c.ID, m.cfg.RecentIDs)
	m.st.dirty = true
}

func (m *Machine) startTurn(c Command) {
	m.snap.Turns++
	t := &Turn{ID: "t" + strconv.FormatUint(m.snap.Turns, 10), Caller: c.Caller, Open: true}
	m.snap.Turn = t
	m.emit(EventTurnStarted, Fields{"turnId": t.ID, "caller": t.Caller, "commandId": c.ID})
	m.join(c)
}

// join admits c as an input of the open turn's next step.
func (m *Machine) join(c Command) {
	t := m.snap.Turn
	t.Inputs = append(t.Inputs, c)
	m.remember(c)
}

func (m *Machine) remember(c Command) {
	role, text := "user", c.Text
	switch c.Kind {
	case KindInputResponse:
		role, text = "input", string(c.Value)
	case KindAuthCallback:
		role, text = "auth", c.AuthResult
	case KindTaskResult:
		role, text = "task", c.TaskID+": "+string(c.Value)+c.TaskError
	}
	m.snap.History = append(m.snap.History, Entry{Role: role, Text: text})
}

// cancelTurn cancels the open turn and its waits (turn.cancelled).
func (m *Machine) cancelTurn() {
	t := m.snap.Turn
	if t == nil {
		return
	}
	m.cancelTurnWaits()
	m.snap.Turn = nil
	m.emit(EventTurnCancelled, Fields{"turnId": t.ID})
	m.emit(EventSessionWaiting, Fields{"reason": "message"})
}

func (m *Machine) cancelTurnWaits() {
	w := &m.snap.Waits
	if w.Input != nil {
		m.emit(EventWaitCancelled, Fields{"wait": "input", "requestId": w.Input.RequestID})
	}
	if w.Auth != nil {
		m.emit(EventWaitCancelled, Fields{"wait": "authorization", "attemptId": w.Auth.AttemptID})
	}
	w.Input, w.Auth = nil, nil
}

func (m *Machine) cancelTasks() {
	for _, t := range m.snap.Waits.Tasks {
		m.emit(EventWaitCancelled, Fields{"wait": "task", "taskId": t.ID})
	}
	m.snap.Waits.Tasks = nil
}

// reset cancels the turn and every wait and forgets history and state.
func (m *Machine) reset() {
	m.cancelTurn()
	m.cancelTasks()
	m.snap.History, m.snap.State = nil, nil
}

func (m *Machine) compact(k Kind) {
	n := len(m.snap.History)
	m.snap.History = nil
	if k == KindCompact && n > 0 {
		m.snap.History = []Entry{{Role: "summary", Text: strconv.Itoa(n) + " entries compacted"}}
	}
}

// answer resumes the parked turn when c answers its current wait; any other
// response (stale request, replaced attempt) is dropped.
func (m *Machine) answer(c Command) {
	w := &m.snap.Waits
	switch {
	case c.Kind == KindInputResponse && w.Input != nil && w.Input.RequestID == c.RequestID:
		w.Input = nil
	case c.Kind == KindAuthCallback && w.Auth != nil && w.Auth.AttemptID == c.AttemptID:
		w.Auth = nil
	default:
		return
	}
	m.snap.Turn.Open = true
	m.join(c)
}

// taskResult settles a live task; an open turn also receives it as input.
func (m *Machine) taskResult(c Command) {
	w := &m.snap.Waits
	i := slices.IndexFunc(w.Tasks, func(t Task) bool { return t.ID == c.TaskID })
	if i < 0 {
		return
	}
	w.Tasks = slices.Delete(w.Tasks, i, i+1)
	f := Fields{"taskId": c.TaskID}
	if c.TaskError != "" {
		f["error"] = c.TaskError
	}
	m.emit(EventTaskCompleted, f)
	if t := m.snap.Turn; t != nil && t.Open {
		m.join(c)
		return
	}
	m.remember(c)
}

func (m *Machine) setPaused(p bool, kind string) {
	if m.snap.Paused != p {
		m.snap.Paused = p
		m.emit(kind, nil)
	}
}

// finalize is the single terminal path: cancel the turn and waits, record
// session.ended. Clean-up follows once the commit lands.
func (m *Machine) finalize(reason string) {
	if t := m.snap.Turn; t != nil {
		m.cancelTurnWaits()
		m.emit(EventTurnCancelled, Fields{"turnId": t.ID})
		m.snap.Turn = nil
	}
	m.cancelTasks()
	m.snap.Ended = reason
	m.emit(EventSessionEnded, Fields{"reason": reason})
}
