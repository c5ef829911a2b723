package runtime

// Idle reports whether the session is idle in the sense of DESIGN.md §5: no
// unprocessed command, no turn or step running, no rollback or settlement
// pending, no human input or authorization awaited, no background task live.
// It is evaluated before a triggering command is enqueued.
func (m *Machine) Idle() bool { return m.IdleReason() == "" }

// IdleReason returns "" when the session is idle, else the handoff skip
// reason, checked in this order: paused, input, authorization, task,
// queued, busy. Busy covers a running or finished step, an open turn, a
// commit or handoff in flight, and every state the machine cannot judge
// (not booted, ended): unknown eligibility means skip.
func (m *Machine) IdleReason() string {
	w := &m.snap.Waits
	switch {
	case !m.booted || m.stopped || m.snap.Ended != "":
		return SkipBusy
	case m.snap.Paused:
		return SkipPaused
	case w.Input != nil:
		return SkipInput
	case w.Auth != nil:
		return SkipAuthorization
	case len(w.Tasks) > 0:
		return SkipTask
	case len(m.queue) > 0:
		return SkipQueued
	case m.unsettled():
		return SkipBusy
	}
	return ""
}

// unsettled reports a running or pending step, commit, handoff or an open
// turn, or a state the machine cannot judge.
func (m *Machine) unsettled() bool {
	if !m.booted || m.snap.Ended != "" || m.busy() || m.result != nil {
		return true
	}
	t := m.snap.Turn
	return t != nil && (t.Open || m.snap.Waits.Input == nil && m.snap.Waits.Auth == nil)
}
