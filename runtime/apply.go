package runtime

import (
	"slices"
	"strconv"

	"github.com/baton-rt/baton/wire"
)

// apply applies one command: its handoff.skipped record (if any), its one
// command.applied event, then its effect on the state. A declined command
// records wire.rejected (undecodable) or command.rejected (refused)
// instead, and nothing else.
func (m *Machine) apply(c Command) {
	switch {
	case c.Rejected != "":
		m.decline(c, wire.WireRejected{CommandID: c.ID, Seq: c.Seq, Reason: c.Rejected})
		return
	case c.Refused != "":
		m.decline(c, wire.CommandRejected{CommandID: c.ID, Seq: c.Seq, Reason: c.Refused})
		return
	case c.Superseded != 0:
		delete(m.skips, c.Seq)
		m.decline(c, wire.CommandSuperseded{CommandID: c.ID, Seq: c.Seq, By: c.Superseded})
		return
	case c.Kind == KindTag:
		m.tag(c)
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
	case KindChildResult:
		m.childResult(c)
	case KindChildWaiting:
		m.childWaiting(c)
	case KindChildResumed:
		m.childResumed(c)
	case KindEnd:
		m.finalize(EndClosed)
	case KindTerminate:
		m.finalizeBy(EndTerminated, wire.EndedByUser, c.EndMessage)
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
		} else if w := m.snap.Debounce; w != nil && w.TimerID == c.TimerID {
			m.closeWindow()
		}
	case KindConfigure:
		m.configure(c)
	case KindPause:
		m.setPaused(true, wire.SessionPaused{})
	case KindResume:
		m.setPaused(false, wire.SessionResumed{})
	}
	// move and unknown kinds: applied, no further effect.
}

// tag merges a tag command into the session's tags and records the
// resulting set (session.tagged). A merge that would leave more than
// wire.MaxTags tags is refused whole (command.rejected, reason
// wire.RejectTooManyTags): the tags stay as they were.
func (m *Machine) tag(c Command) {
	var t wire.Tag
	if c.Tag != nil {
		t = *c.Tag
	}
	tags, err := wire.MergeTags(m.snap.Tags, t)
	if err != nil {
		m.decline(c, wire.CommandRejected{CommandID: c.ID, Seq: c.Seq, Reason: wire.RejectTooManyTags})
		return
	}
	m.markApplied(c)
	m.snap.Tags = tags
	set := tags // replaced whole by the next merge, never changed in place
	if set == nil {
		set = map[string]string{} // none left: {"tags":{}}
	}
	m.emit(wire.SessionTagged{Tags: set})
}

func (m *Machine) markApplied(c Command) {
	if r, ok := m.skips[c.Seq]; ok {
		delete(m.skips, c.Seq)
		target, _ := m.handoffTarget(c)
		m.emit(handoffSkipped(wire.HandoffSkipped{
			Reason: r, CommandID: c.ID, Seq: c.Seq,
			DeploymentID: m.cfg.Deployment, TargetDeploymentID: target,
		}))
	}
	m.emit(wire.CommandApplied{CommandID: c.ID, Seq: c.Seq, Kind: string(c.Kind)})
	m.snap.Applied.add(c.Seq, c.ID, m.cfg.RecentIDs)
	m.st.applied = append(m.st.applied, Ref{Seq: c.Seq, ID: c.ID})
}

// decline records a command that is processed but never applied: its one
// event b (in place of command.applied), its sequence in the applied set
// (a redelivery is a duplicate), and a commit.
func (m *Machine) decline(c Command, b wire.EventBody) {
	m.emit(b)
	m.snap.Applied.add(c.Seq, c.ID, m.cfg.RecentIDs)
	m.st.dirty = true
}

// startTurn starts a turn with c and more as its first step's inputs (a
// debounce window's deliveries), then holds it to the session's limit.
func (m *Machine) startTurn(c Command, more ...Command) {
	m.snap.Turns++
	t := &Turn{ID: "t" + strconv.FormatUint(m.snap.Turns, 10), Caller: c.Caller, Open: true,
		Before: &Before{State: m.snap.State, HistoryLen: len(m.snap.History)}}
	m.snap.Turn = t
	m.adoptParent(t, c)
	m.emit(wire.TurnStarted{TurnID: t.ID, Caller: t.Caller, CommandID: c.ID})
	m.join(c)
	for _, x := range more {
		m.join(x)
	}
	if hit, ok := m.sessionLimitHit(t); ok { // no tokens left: no step runs
		m.limitReached(t, hit)
	}
}

// join admits c as an input of the open turn's next step.
func (m *Machine) join(c Command) {
	t := m.snap.Turn
	t.Inputs = append(t.Inputs, c)
	m.remember(c)
}

// remember appends the runtime's history entry of an admitted command
// (see [Entry]).
func (m *Machine) remember(c Command) {
	var e Entry
	switch c.Kind {
	case KindInputResponse:
		e = typedEntry(EntryInputResponse, jsonText(c.Value))
	case KindAuthCallback:
		e = typedEntry(EntryAuthCallback, c.AuthResult)
	case KindTaskResult:
		e = typedEntry(EntryTaskResult, c.TaskID+": "+jsonText(c.Value)+c.TaskError)
	case KindChildResult:
		e = typedEntry(EntryChildResult, ChildResultText(c.Child))
	default:
		e = deliveryEntry(c)
	}
	m.snap.History = append(m.snap.History, e)
}

// cancelTurn cancels the open turn and its waits (turn.cancelled).
func (m *Machine) cancelTurn() {
	t := m.snap.Turn
	if t == nil {
		return
	}
	m.cancelTurnWaits()
	m.cancelChildren(t)
	m.reportTurn(t, wire.ChildCancelled, "", "")
	m.snap.Turn = nil
	m.closeToolCalls(ToolCancelled)
	m.emit(wire.TurnCancelled{TurnID: t.ID})
	m.emit(wire.SessionWaiting{Reason: wire.WaitMessage})
}

func (m *Machine) cancelTurnWaits() {
	w := &m.snap.Waits
	if w.Input != nil {
		m.emit(wire.WaitCancelled{Wait: wire.WaitInput, RequestID: w.Input.RequestID})
	}
	if w.Auth != nil {
		m.emit(wire.WaitCancelled{Wait: wire.WaitAuthorization, AttemptID: w.Auth.AttemptID})
	}
	w.Input, w.Auth = nil, nil
}

func (m *Machine) cancelTasks() {
	for _, t := range m.snap.Waits.Tasks {
		m.emit(wire.WaitCancelled{Wait: wire.WaitTask, TaskID: t.ID})
	}
	m.snap.Waits.Tasks = nil
}

// reset cancels the turn and every wait and forgets history and state.
func (m *Machine) reset() {
	m.cancelTurn()
	m.cancelTasks()
	m.closeHandles()
	m.snap.History, m.snap.State = nil, nil
}

func (m *Machine) compact(k Kind) {
	if k == KindClear {
		m.closeHandles()
	}
	n := len(m.snap.History)
	m.snap.History = nil
	if k == KindCompact && n > 0 {
		m.snap.History = []Entry{{Role: RoleSystem, Kind: EntrySummary, Content: []Part{TextPart(strconv.Itoa(n) + " entries compacted")}}}
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
	m.reportWait(m.snap.Turn, c.RequestID, c.AttemptID, "", true)
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
	kind := wire.TaskKind(w.Tasks[i].Kind)
	w.Tasks = slices.Delete(w.Tasks, i, i+1)
	done := wire.TaskCompletedV2{TaskID: c.TaskID, Kind: kind, Error: c.TaskError, Code: wire.TaskErrorCode(c.TaskError)}
	if c.TaskError == "" {
		done.Result = slices.Clone(c.Value)
	}
	m.emit(done)
	if t := m.snap.Turn; t != nil && t.Open {
		m.join(c)
		return
	}
	m.remember(c)
}

func (m *Machine) setPaused(p bool, b wire.EventBody) {
	if m.snap.Paused != p {
		m.snap.Paused = p
		m.emit(b)
	}
}

// finalize is the single terminal path: cancel the turn and waits, record
// session.ended. Clean-up follows once the commit lands.
func (m *Machine) finalize(reason string) { m.finalizeBy(reason, "", "") }

// finalizeBy is finalize recording who ended the session (by: a user's
// terminate) and their message in session.ended, at the lowest data
// version that expresses them.
func (m *Machine) finalizeBy(reason, by, message string) {
	if t := m.snap.Turn; t != nil {
		m.cancelTurnWaits()
		m.closeToolCalls(ToolCancelled)
		if reason != EndClosed { // the parent that closed it expects nothing
			m.reportTurn(t, wire.ChildCancelled, "", reason)
		}
		m.emit(wire.TurnCancelled{TurnID: t.ID})
		m.snap.Turn = nil
	}
	m.cancelTasks()
	m.closeHandles()
	m.snap.Debounce = nil // its deliveries never start a turn
	m.snap.Ended = reason
	m.emit(wire.LowestSessionEndedBy(reason, by, message))
}

// handoffSkipped is handoff.skipped at the lowest data version that
// expresses its reason (2 for child).
func handoffSkipped(d wire.HandoffSkipped) wire.EventBody {
	if d.Reason == SkipChild {
		return wire.HandoffSkippedV2(d)
	}
	return d
}
