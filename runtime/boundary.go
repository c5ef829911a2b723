package runtime

import (
	"slices"

	"github.com/baton-rt/baton/wire"
)

// advance runs one committed boundary: fold the finished step, apply the
// commands the rules admit, and either commit the changes or run the next
// step. It does nothing while a step, commit or handoff is in flight.
func (m *Machine) advance() []Effect {
	if m.busy() {
		return nil
	}
	m.foldResult()
	m.openBudget()
	m.applyImmediate()
	m.admitInterrupts()
	m.admitSteers()
	m.admitFIFO()
	if m.st.changed() {
		return []Effect{m.flush()}
	}
	return m.runNext()
}

// foldResult folds the finished step into the state, unless an interrupt
// waits in the queue: then the step is rolled back (discarded).
func (m *Machine) foldResult() {
	d := m.result
	if d == nil {
		return
	}
	m.result = nil
	if m.interruptQueued() {
		m.emit(wire.StepInterrupted{TurnID: d.TurnID, Step: uint64(d.Step)})
		m.interrupted(m.snap.Turn, d)
		return
	}
	m.fold(d)
}

func (m *Machine) interruptQueued() bool {
	return slices.ContainsFunc(m.queue, func(c Command) bool { return m.interrupts(&c) })
}

// applyImmediate applies the immediate-class commands, in sequence order,
// while the boundary's budget lasts; cancel and reset also from its
// reserve, ahead of the ones it leaves for the next boundary.
func (m *Machine) applyImmediate() {
	for i := 0; m.snap.Ended == "" && i < len(m.queue); {
		c := &m.queue[i]
		switch {
		case classOf(c) != classImmediate:
			i++
		case !m.bud.roomFor(c):
			m.bud.deferFrom(c.Seq)
			i++
		default:
			m.admit(i)
		}
	}
}

// admitSteers joins the open turn's steering deliveries from its caller,
// while the budget lasts and the turn's inputs have room.
func (m *Machine) admitSteers() {
	for m.canSteer() {
		t := m.snap.Turn
		i := slices.IndexFunc(m.queue, func(c Command) bool { return steers(&c) && c.Caller == t.Caller })
		if i < 0 || !m.bud.roomFor(&m.queue[i]) || !m.inputRoom(t, &m.queue[i]) {
			return
		}
		c := m.take(i)
		m.markApplied(c)
		m.join(c)
		m.charge()
	}
}

// inputRoom reports whether c may join t's next step: a step sees at most
// wire.MaxTurnInputs inputs of wire.MaxTurnInputBytes (the first always
// joins); a steer beyond waits for the step after.
func (m *Machine) inputRoom(t *Turn, c *Command) bool {
	if len(t.Inputs) == 0 || m.bud.unlimited {
		return true
	}
	return len(t.Inputs) < wire.MaxTurnInputs && m.bud.turnBytes+inputBytes(*c) <= wire.MaxTurnInputBytes
}

func (m *Machine) canSteer() bool {
	t := m.snap.Turn
	return m.snap.Ended == "" && !m.snap.Paused && t != nil && t.Open && m.retryOf(t) == nil
}

// admitFIFO applies the FIFO head while the session is settled and the
// budget lasts: clear and compact apply, a debounce delivery opens or
// joins the debounce window, any other delivery starts the next turn and
// ends the admission. While a window is open only debounce deliveries
// pass (one that finds the window full waits for it to close).
func (m *Machine) admitFIFO() {
	for m.snap.Ended == "" && !m.snap.Paused && m.snap.Turn == nil && len(m.queue) > 0 {
		i := 0
		if isBroken(broken.admitNewest, m) {
			i = len(m.queue) - 1
		}
		c := &m.queue[i]
		if classOf(c) != classFIFO || !m.bud.roomFor(c) {
			return
		}
		if debounces(c) && m.windowRoom(c) {
			m.gather(i)
			m.charge()
			continue
		}
		if m.snap.Debounce != nil { // an open window holds the FIFO
			return
		}
		if c := m.admit(i); c.Kind == KindDeliver {
			return
		}
	}
}

// admit applies the queued command at i and charges the budget for it.
func (m *Machine) admit(i int) Command {
	c := m.take(i)
	m.bud.admitted(&c)
	m.apply(c)
	m.charge()
	return c
}

func (m *Machine) take(i int) Command {
	c := m.queue[i]
	m.queue = slices.Delete(m.queue, i, i+1)
	return c
}

// runNext starts the open turn's next step.
func (m *Machine) runNext() []Effect {
	t := m.snap.Turn
	if t == nil || !t.Open || m.snap.Paused || m.snap.Ended != "" {
		return nil
	}
	s := m.snap.Clone()
	// The step's history is its own copy: Clone shares the session's, and
	// an agent that truncates and appends to its input, or overwrites an
	// entry, must not reach the history the next commit writes. Its
	// entries' parts stay shared (read-only: see Entry).
	m.step = &RunStep{Input: StepInput{
		SessionID: m.cfg.SessionID, TurnID: t.ID, Step: t.Steps + 1, Caller: t.Caller,
		State: s.State, History: slices.Clone(s.History), Inputs: s.Turn.Inputs,
	}, Retry: m.retryOf(t)}
	return []Effect{*m.step}
}

// flush turns the stage into the one Commit of this boundary and queues the
// effects due once it lands: publish first, then the rest.
func (m *Machine) flush() Effect {
	m.dropForgotten()
	purge := append(m.advanceApplied(), m.forget()...)
	for i := range m.st.events {
		m.snap.EventSeq++
		m.st.events[i].Seq = m.snap.EventSeq
	}
	m.snap.Outbox = m.st.events
	m.snap.Sends = m.st.sends
	m.snap.Writer = Writer{RunID: m.cfg.RunID, Write: m.snap.Writer.Write + 1}
	c := Commit{Snapshot: m.snap.Clone(), Applied: m.st.applied}
	m.after = m.afterCommit(purge)
	m.commit, m.st = &c, stage{}
	return c
}

func (m *Machine) afterCommit(purge []Effect) []Effect {
	var out []Effect
	if len(m.st.events) > 0 {
		out = append(out, Publish{Events: slices.Clone(m.st.events)})
	}
	if len(m.st.sends) > 0 {
		out = append(out, SendCommands{Sends: slices.Clone(m.st.sends)})
	}
	out = append(append(out, m.st.after...), purge...)
	if m.snap.Ended != "" {
		out = append(out, m.cleanup())
	}
	return out
}

// advanceApplied raises Applied.Next to the lowest unprocessed sequence.
func (m *Machine) advanceApplied() []Effect {
	next := m.maxSeen + 1
	if len(m.queue) > 0 {
		next = m.queue[0].Seq
	}
	if next <= m.snap.Applied.Next {
		return nil
	}
	first := m.snap.Applied.Next == 0
	m.snap.Applied.advance(next)
	if first && next == 1 {
		return nil // nothing to purge yet
	}
	return []Effect{Purge{Below: next}}
}

func (m *Machine) cleanup() Effect {
	return Cleanup{Reason: m.snap.Ended, Aliases: slices.Clone(m.snap.Aliases)}
}
