package runtime

import (
	"slices"
	"time"

	"github.com/baton-rt/baton/wire"
)

// Busy modes: what a delivery does when the session is busy. The table
// of modes × session states × caller is in docs/runtime.md ("Busy
// modes"); this file implements it.

// DefaultMaxDebounce bounds a debounce window from its first delivery
// when Config.MaxDebounce is zero.
const DefaultMaxDebounce = 10 * time.Second

// mode is c's effective mode: its own, else the session's default, else
// queue.
func (m *Machine) mode(c *Command) string {
	switch {
	case c.Mode != "":
		return c.Mode
	case m.snap.DefaultMode != "":
		return m.snap.DefaultMode
	}
	return ModeQueue
}

// busyMode settles, when c is received, what its mode decides at once:
// a delivery that names no mode takes the session's default (and its
// debounce window); a reject-mode delivery that finds the session busy is
// refused (command.rejected, reason busy); a latest-mode delivery
// supersedes the queued deliveries of its caller. A crash before the
// commit that records the decision re-decides it when the command is
// received again, against the recovered state.
func (m *Machine) busyMode(c *Command) {
	if c.Kind != KindDeliver || declined(c) {
		return
	}
	if c.Mode == "" {
		c.Mode = m.mode(c)
		if c.Mode == ModeDebounce && c.DebounceMs == 0 {
			c.DebounceMs = m.snap.DefaultDebounceMs
		}
	}
	if !wire.LegacyMode(c.Mode) {
		m.snap.BusyModes = true
	}
	switch c.Mode {
	case ModeReject:
		if m.busyFor(c) {
			c.Refused = wire.RejectBusy
		}
	case ModeLatest:
		m.supersede(c)
	case ModeInterrupt, ModeRollback:
		if t := m.snap.Turn; t != nil && t.Caller == c.Caller && c.Parent == nil {
			c.Interrupts = t.ID
		}
	}
}

// busyFor reports whether a reject-mode delivery finds the session busy:
// a turn live (running, open or parked), a debounce window open, or a
// FIFO command waiting ahead of it.
func (m *Machine) busyFor(c *Command) bool {
	if m.snap.Turn != nil || m.snap.Debounce != nil {
		return true
	}
	return slices.ContainsFunc(m.queue, func(q Command) bool { return q.Seq < c.Seq && classOf(&q) == classFIFO })
}

// supersede marks the queued deliveries of c's caller that no turn has
// started yet as superseded by c: all but steers and the interrupts and
// rollbacks of the live turn (which act on that turn, and may have reached
// its step already), and the pending handoff trigger.
func (m *Machine) supersede(c *Command) {
	for i := range m.queue {
		q := &m.queue[i]
		if q.Seq >= c.Seq || q.Kind != KindDeliver || declined(q) || q.Caller != c.Caller || q.Parent != nil ||
			q.Mode == ModeSteer || m.interrupting(q) || m.handoff != nil && m.handoff.Seq == q.Seq {
			continue
		}
		q.Superseded = c.Seq
	}
}

// interrupting reports an interrupt or rollback delivery that acts on
// the live turn: its caller's turn, live when the owner received it
// (Interrupts). Another caller's, or one received while no turn of its
// caller was live, waits in the FIFO like queue (R7). An interrupt joins
// only a turn that is open or parked on an input or authorization wait;
// one that waits for its children keeps it in the FIFO.
func (m *Machine) interrupting(c *Command) bool {
	t := m.snap.Turn
	if t == nil || c.Kind != KindDeliver || declined(c) || c.Interrupts != t.ID {
		return false
	}
	switch c.Mode {
	case ModeRollback:
		return true
	case ModeInterrupt:
		return t.Open || m.snap.Waits.Input != nil || m.snap.Waits.Auth != nil
	}
	return false
}

// admitInterrupts applies the queued interrupt and rollback deliveries
// of the live turn's caller, in sequence order, while the budget lasts.
func (m *Machine) admitInterrupts() {
	for m.snap.Ended == "" && !m.snap.Paused && m.snap.Turn != nil {
		i := slices.IndexFunc(m.queue, func(c Command) bool { return m.interrupting(&c) })
		if i < 0 || !m.bud.roomFor(&m.queue[i]) {
			return
		}
		if m.queue[i].Mode == ModeInterrupt && !m.inputRoom(m.snap.Turn, &m.queue[i]) {
			return // joins after the next step
		}
		c := m.take(i)
		m.bud.admitted(&c)
		if c.Mode == ModeRollback {
			m.rollback(c)
		} else {
			m.interruptTurn(c)
		}
		m.charge()
	}
}

// interruptTurn joins an interrupt delivery to its caller's live turn:
// a wait the turn was parked on is cancelled and the turn continues with
// the new input (the aborted step was recorded by interrupted).
func (m *Machine) interruptTurn(c Command) {
	t := m.snap.Turn
	m.markApplied(c)
	if w := &m.snap.Waits; w.Input != nil || w.Auth != nil {
		var req, att string
		if w.Input != nil {
			req = w.Input.RequestID
		}
		if w.Auth != nil {
			att = w.Auth.AttemptID
		}
		m.cancelTurnWaits()
		m.reportWait(t, req, att, "", true)
	}
	t.Open = true
	m.join(c)
}

// rollback cancels its caller's live turn and discards what the agent
// could see of it: the state and history go back to before the turn; the
// spent usage stays. The turn's events stay in the stream, followed by
// turn.rolled_back with the journaled calls it made (the outside world
// is not undone). Children the turn delegated to are cancelled and their
// handles closed. Then c starts a fresh turn.
func (m *Machine) rollback(c Command) {
	t := m.snap.Turn
	m.markApplied(c)
	m.cancelTurnWaits()
	m.cancelChildren(t)
	for i := range m.snap.Handles {
		if h := m.snap.Handles[i]; h.TurnID == t.ID && h.State == wire.HandleActive {
			m.closeHandle(i)
		}
	}
	m.reportTurn(t, wire.ChildCancelled, "", "")
	m.snap.Turn = nil
	m.emit(wire.TurnCancelled{TurnID: t.ID, CommandID: c.ID})
	if b := t.Before; b != nil { // nil: a turn an older build started
		m.snap.State = b.State
		if b.HistoryLen <= len(m.snap.History) {
			m.snap.History = slices.Clip(m.snap.History[:b.HistoryLen])
		}
		calls := t.Calls
		if calls == nil {
			calls = []wire.CallRef{}
		}
		m.emit(wire.TurnRolledBack{TurnID: t.ID, Calls: calls})
	}
	m.startTurn(c)
}

// interrupted records a step whose result the boundary discards: its
// usage counts whatever discarded it (a cancel, reset, end or timeout
// too: what an agent spent is never taken back). For an interrupt or
// rollback of its caller, the step counter also advances past it (no step
// key is reused), its journaled calls count, and, for an interrupt, the
// history records it (a system entry of kind step_interrupted).
func (m *Machine) interrupted(t *Turn, d *StepDone) {
	m.addUsage(t, d.Result.Usage)
	i := slices.IndexFunc(m.queue, func(c Command) bool { return m.interrupting(&c) })
	if i < 0 {
		return
	}
	m.retry = nil
	t.Steps++
	t.Inputs = nil // in the history already: the next step's input is the new delivery
	m.recordCalls(t, d.Calls)
	if m.queue[i].Mode == ModeInterrupt {
		m.snap.History = append(m.snap.History, Entry{Role: RoleSystem, Kind: wire.EntryStepInterrupted,
			Content: []Part{TextPart("step " + itoa(t.Steps) + " interrupted")}})
	}
}

// recordCalls adds the journaled calls of t's step t.Steps to t.Calls
// (at most wire.MaxTurnInputs are kept).
func (m *Machine) recordCalls(t *Turn, names []string) {
	for i, n := range names {
		if len(t.Calls) >= wire.MaxTurnInputs {
			return
		}
		t.Calls = append(t.Calls, wire.CallRef{Name: n, Step: uint64(t.Steps), Position: i})
	}
}

// debounces reports a delivery whose effective mode is debounce.
func debounces(c *Command) bool {
	return c.Kind == KindDeliver && !declined(c) && c.Mode == ModeDebounce
}

// windowRoom reports whether c may join the open window (if any): a
// window holds at most what one step may see.
func (m *Machine) windowRoom(c *Command) bool {
	w := m.snap.Debounce
	if w == nil {
		return true
	}
	n := 0
	for _, in := range w.Inputs {
		n += inputBytes(in)
	}
	return len(w.Inputs) < wire.MaxTurnInputs && n+inputBytes(*c) <= wire.MaxTurnInputBytes
}

// gather applies the debounce delivery at the FIFO head: it opens the
// window, or joins and extends the open one, up to the owner's maximum
// from its first delivery, and (re-)arms the window's timer.
func (m *Machine) gather(i int) {
	c := m.take(i)
	m.markApplied(c)
	m.bud.used += inputBytes(c)
	w := m.snap.Debounce
	if w == nil {
		w = &Window{OpenedAt: m.now}
		m.snap.Debounce = w
	}
	w.Inputs = append(w.Inputs, c)
	until := m.now.Add(time.Duration(max(c.DebounceMs, wire.MinDebounceMs)) * time.Millisecond)
	maxWindow := m.cfg.MaxDebounce
	if maxWindow <= 0 {
		maxWindow = DefaultMaxDebounce
	}
	if until.Before(w.Until) {
		until = w.Until
	}
	if limit := w.OpenedAt.Add(maxWindow); until.After(limit) {
		until = limit
	}
	w.Until, w.TimerID = until, m.cfg.RunID+"-d"+itoa(int(c.Seq))
	m.st.after = slices.DeleteFunc(m.st.after, func(e Effect) bool { a, ok := e.(ArmTimer); return ok && a.Debounce })
	m.st.after = append(m.st.after, m.windowTimer())
}

// windowTimer arms the open window's timer.
func (m *Machine) windowTimer() ArmTimer {
	w := m.snap.Debounce
	return ArmTimer{Timer: Timer{ID: w.TimerID, Deadline: w.Until}, Debounce: true}
}

// closeWindow starts one turn whose inputs are every delivery of the
// window, in order, when the window's timer fires.
func (m *Machine) closeWindow() {
	w := m.snap.Debounce
	m.snap.Debounce = nil
	if m.snap.Turn != nil { // no turn starts while a window is open
		for _, c := range w.Inputs {
			m.join(c)
		}
		return
	}
	m.startTurn(w.Inputs[0], w.Inputs[1:]...)
}

// configure sets the session's default mode (configure command).
func (m *Machine) configure(c Command) {
	m.snap.BusyModes = true
	m.snap.DefaultMode, m.snap.DefaultDebounceMs = c.DefaultMode, 0
	if c.DefaultMode == ModeQueue {
		m.snap.DefaultMode = ""
	}
	if c.DefaultMode == ModeDebounce {
		m.snap.DefaultDebounceMs = c.DefaultDebounceMs
	}
	m.st.dirty = true
}
