package runtime

import (
	"fmt"
	"slices"
	"time"

	"github.com/baton-rt/baton/wire"
)

func (m *Machine) boot(b Boot) ([]Effect, error) {
	if m.booted {
		return nil, ErrBooted
	}
	if f := b.First; f != nil {
		if f.Cmd.Seq == 0 || f.Cmd.ID == "" {
			return nil, ErrInvalidCommand
		}
		if m.HandsOff(f.Cmd) {
			return nil, fmt.Errorf("%w: the first command %d hands the session off; send it after the boot", ErrInvalidCommand, f.Cmd.Seq)
		}
	}
	m.booted, m.now = true, b.Now
	var out []Effect
	if len(m.snap.Outbox) > 0 {
		out = append(out, Publish{Events: slices.Clone(m.snap.Outbox)})
	}
	if s := m.unsent(); len(s) > 0 { // the last commit's sends may not have left
		out = append(out, SendCommands{Sends: s})
	}
	if m.snap.Ended != "" {
		return append(out, m.cleanup()), nil
	}
	if h := b.Handoff; h != nil && b.Reason == BootHandoff {
		if h.Trigger.ID != "" && h.Trigger.Seq > 0 { // unknown for an older marker
			m.handoffStarted(h.ID, m.cfg.Deployment, h.Trigger)
		}
		m.emit(wire.HandoffCompleted{
			HandoffID: h.ID, FromDeploymentID: h.From, ToDeploymentID: m.cfg.Deployment, Epoch: h.Epoch,
		})
	}
	if a := b.Adopt; a != nil && b.Reason == BootAdopt {
		m.adopted(a)
	}
	out = append(out, m.bootTimer(b.Reason)...)
	if b.Commit {
		m.st.dirty = true
	}
	if f := b.First; f != nil {
		if !f.Now.IsZero() {
			m.now = f.Now
		}
		// receive advances when it queues the command; a duplicate is
		// dropped without, and the advance below commits the boot alone.
		got, err := m.receive(f.Cmd)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	return append(out, m.advance()...), nil
}

// HandsOff reports whether receiving c now would hand the session off (c
// names another deployment than this machine's), ignoring whether the
// session is idle. A driver asks it before it sends c with a Boot (First).
func (m *Machine) HandsOff(c Command) bool {
	_, ok := m.handoffTarget(c)
	return ok
}

// adopted records an adoption: no live wait crosses deployments silently
// (forced: each is cancelled; unforced adoptions happen only without waits,
// the driver's rule), and a step the dead owner had not committed is
// recorded as interrupted before it runs again on this deployment.
func (m *Machine) adopted(a *AdoptInfo) {
	m.emit(wire.HandoffCompleted{
		HandoffID: a.ID, FromDeploymentID: a.From, ToDeploymentID: m.cfg.Deployment, Epoch: a.Epoch,
	})
	if a.Force {
		m.cancelTurn()
		m.cancelTasks()
	}
	if t := m.snap.Turn; t != nil && m.snap.Waits.Input == nil && m.snap.Waits.Auth == nil && !m.waitsOnChild(t) {
		m.emit(wire.StepInterrupted{TurnID: t.ID, Step: uint64(t.Steps + 1)})
	}
}

// bootTimer starts a new session, re-arms a successor's timer with the
// original duration, or re-publishes a recovered one.
func (m *Machine) bootTimer(r BootReason) []Effect {
	t := m.snap.Timer
	switch {
	case !m.snap.Started:
		m.start()
	case (r == BootHandoff || r == BootAdopt) && t != nil:
		m.armTimer(t.Duration)
	case t != nil:
		return append([]Effect{ArmTimer{Timer: *t}}, m.rearmWindow()...)
	}
	return m.rearmWindow()
}

// rearmWindow re-publishes a recovered debounce window's timer (which
// replaces it if it is still scheduled; a timer that fired already left
// its timeout in the inbox, and the repeat is a duplicate).
func (m *Machine) rearmWindow() []Effect {
	if m.snap.Debounce == nil {
		return nil
	}
	return []Effect{m.windowTimer()}
}

func (m *Machine) start() {
	m.snap.Started = true
	m.emit(wire.SessionStarted{SessionID: m.cfg.SessionID, DeploymentID: m.cfg.Deployment})
	if m.cfg.Timeout > 0 {
		m.armTimer(m.cfg.Timeout)
	}
}

func (m *Machine) armTimer(d time.Duration) {
	t := Timer{ID: m.cfg.RunID, Deadline: m.now.Add(d), Duration: d}
	m.snap.Timer = &t
	m.st.dirty = true
	m.st.after = append(m.st.after, ArmTimer{Timer: t})
}

func (m *Machine) receive(c Command) ([]Effect, error) {
	if m.snap.Ended != "" {
		return nil, ErrEnded
	}
	if c.Seq == 0 || c.ID == "" {
		return nil, ErrInvalidCommand
	}
	if m.duplicate(c) {
		m.maxSeen = max(m.maxSeen, c.Seq)
		return nil, nil
	}
	m.busyMode(&c)
	if out, ok := m.decide(c); ok {
		return out, nil
	}
	m.enqueue(c)
	return append(m.interrupt(c), m.advance()...), nil
}

// duplicate reports a redelivered sequence or a repeated command ID.
func (m *Machine) duplicate(c Command) bool {
	if m.snap.Applied.Has(c.Seq) || m.snap.Applied.HasID(c.ID) {
		return true
	}
	return slices.ContainsFunc(m.queue, func(q Command) bool { return q.Seq == c.Seq || q.ID == c.ID })
}

// decide evaluates the handoff signal once, before c is enqueued: an idle
// session hands off; a busy one records why it skipped when c is applied.
func (m *Machine) decide(c Command) ([]Effect, bool) {
	target, ok := m.handoffTarget(c)
	if !ok {
		return nil, false
	}
	if r := m.IdleReason(); r != "" {
		if c.Kind == KindMove && c.Force && isWait(r) {
			return m.forceMove(c, target), true
		}
		m.skips[c.Seq] = r
		return nil, false
	}
	m.enqueue(c)
	m.handoff = &c
	return []Effect{Handoff{Trigger: c, Target: target}}, true
}

// isWait: the skip reasons a forced move overrides — waits, which it
// cancels. A running step, a queue or a pause still skip.
func isWait(reason string) bool {
	return reason == SkipInput || reason == SkipAuthorization || reason == SkipTask
}

// forceMove is an operator's forced move (allowed by the ingress only for a
// retired source) of a session kept only by its waits: each wait is
// cancelled (wait.cancelled, and the turn it parked: turn.cancelled), that
// is committed, and then the handoff runs with the move as its trigger. No
// live wait crosses deployments silently.
func (m *Machine) forceMove(c Command, target string) []Effect {
	m.cancelTurn()
	m.cancelTasks()
	m.enqueue(c)
	m.handoff = &c
	m.st.after = append(m.st.after, Handoff{Trigger: c, Target: target})
	return []Effect{m.flush()}
}

// handoffTarget returns the deployment a command asks to move to: only a
// delivery from another deployment, or a move to another deployment —
// never a declined one (undecodable, or refused by the owner: a trigger
// stamped by another agent's deployment).
func (m *Machine) handoffTarget(c Command) (string, bool) {
	target := ""
	switch {
	case declined(&c):
	case c.Kind == KindDeliver && c.Parent == nil: // a parent's delivery never moves its child
		target = c.Deployment
	case c.Kind == KindMove:
		target = c.Target
	}
	return target, target != "" && target != m.cfg.Deployment
}

func (m *Machine) enqueue(c Command) {
	m.maxSeen = max(m.maxSeen, c.Seq)
	i, _ := slices.BinarySearchFunc(m.queue, c.Seq, func(q Command, s uint64) int { return cmpSeq(q.Seq, s) })
	m.queue = slices.Insert(m.queue, i, c)
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// interrupt cancels the running step at once for cancel, reset and a
// matching timeout.
func (m *Machine) interrupt(c Command) []Effect {
	if m.step == nil || m.cancelled || !m.interrupts(&c) {
		return nil
	}
	m.cancelled = true
	in := m.step.Input
	return []Effect{CancelStep{TurnID: in.TurnID, Step: in.Step, Reason: c.Kind}}
}

func (m *Machine) stepDone(d StepDone) ([]Effect, error) {
	if m.step == nil || d.TurnID != m.step.Input.TurnID || d.Step != m.step.Input.Step {
		return nil, ErrNoStep
	}
	m.step, m.cancelled, m.result = nil, false, &d
	return m.advance(), nil
}

func (m *Machine) commitDone(d CommitDone) ([]Effect, error) {
	if m.commit == nil {
		return nil, ErrNoCommit
	}
	switch d.Outcome {
	case CommitConflict:
		m.stop()
		return nil, nil
	case CommitUncertain:
		return []Effect{ResolveCommit{Writer: m.commit.Snapshot.Writer}}, nil
	}
	out := m.after
	m.commit, m.after = nil, nil
	return append(out, m.advance()...), nil
}

func (m *Machine) handoffDone(h HandoffDone) ([]Effect, error) {
	if m.handoff == nil {
		return nil, ErrNoHandoff
	}
	if h.Moved {
		m.stop()
		return nil, nil
	}
	switch {
	case h.SkipReason != "":
		m.skips[m.handoff.Seq] = h.SkipReason
	case h.Failure != "":
		c := *m.handoff
		target, _ := m.handoffTarget(c)
		m.handoffStarted(h.HandoffID, target, Ref{Seq: c.Seq, ID: c.ID})
		m.emit(wire.HandoffFailed{HandoffID: h.HandoffID, TargetDeploymentID: target, Reason: h.Failure})
	}
	m.handoff = nil
	return m.advance(), nil
}

func (m *Machine) handoffStarted(id, target string, trigger Ref) {
	m.emit(wire.HandoffStarted{
		HandoffID: id, TargetDeploymentID: target,
		Trigger: wire.CommandRef{CommandID: trigger.ID, Seq: trigger.Seq},
	})
}
