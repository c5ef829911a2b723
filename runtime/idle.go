package runtime

import "github.com/baton-rt/baton/record"

// Idle reports whether the session is idle in the sense of docs/runtime.md: no
// unprocessed command, no turn or step running, no rollback or settlement
// pending, no human input or authorization awaited, no background task live.
// It is evaluated before a triggering command is enqueued.
func (m *Machine) Idle() bool { return m.IdleReason() == "" }

// IdleReason returns "" when the session is idle, else the handoff skip
// reason, checked in this order: paused, input, authorization, task,
// child (an active handle or a descendant's wait), queued, busy. Busy covers a running or finished step, an open turn, a
// commit or handoff in flight, and every state the machine cannot judge
// (not booted, ended): unknown eligibility means skip.
//
// The rule is record.NotIdle, shared with the ingress; the machine adds its
// live conditions on top.
func (m *Machine) IdleReason() string {
	if !m.booted || m.stopped || m.snap.Ended != "" {
		return SkipBusy
	}
	if r := record.NotIdle(m.activity()); r != "" {
		return r
	}
	if m.busy() || m.result != nil || m.snap.Debounce != nil {
		return SkipBusy
	}
	return ""
}

// idleExpire ends an idle session with reason idle_expired (IdleExpire);
// a session that is not idle is left as it is.
func (m *Machine) idleExpire() []Effect {
	if m.IdleReason() != "" {
		return nil
	}
	m.finalize(EndIdleExpired)
	return []Effect{m.flush()}
}

// activity is the working state as the idle rule reads it. A turn parked on
// an input or authorization wait is reported by the wait.
func (m *Machine) activity() record.Activity {
	w := &m.snap.Waits
	return record.Activity{Paused: m.snap.Paused, Input: w.Input != nil, Auth: w.Auth != nil,
		Tasks: len(w.Tasks), Children: m.activeChildren(), Queued: len(m.queue) > 0, TurnLive: m.snap.Turn != nil}
}
