package runtime

import (
	"maps"
	"slices"

	"github.com/baton-rt/baton/wire"
)

// Pending child sends. A send that creates a child on a deployment with no
// live owner does not hold up the session: the driver reports it
// ([SendsPending]) and retries it outside the session loop, and the
// machine keeps it in the checkpoint (pendingSends, state version 6) while
// its handle is active with its delegation, so it survives later commits
// and reboots with its start time. It ends in one of three ways:
//
//   - it leaves ([SendsLeft]): dropped;
//   - its timeout passes: the driver publishes a failed child.result
//     (child_unavailable) to this session's own inbox, applied once like
//     any child result (the handle closes, child.completed data version 2
//     names the error, the waiting turn re-opens with it);
//   - the handle settles otherwise (the turn is cancelled, the handle
//     closed, the session reset or ended): dropped, and the driver stops
//     retrying it.

// NoChildTurn is the turnId of a child result no child turn produced (the
// child could not be created, or had ended).
const NoChildTurn = "none"

// PendingSends returns a copy of the pending child sends.
func (m *Machine) PendingSends() []PendingSend { return slices.Clone(m.snap.PendingSends) }

// Handles are the session's child handles (a copy; Snapshot's without the
// rest of the snapshot).
func (m *Machine) Handles() []Handle { return slices.Clone(m.snap.Handles) }

// Tags returns a copy of the session's tags.
func (m *Machine) Tags() map[string]string { return maps.Clone(m.snap.Tags) }

// sendsPending keeps each send whose handle is active with its delegation
// and which is not pending yet.
func (m *Machine) sendsPending(sends []Send) []Effect {
	for _, s := range sends {
		if s.Alias == "" || m.pendingIndex(s.Command.ID) >= 0 || !m.awaits(s.Command.ID) {
			continue
		}
		since := s.Command.AcceptedAt
		if since.IsZero() {
			since = m.now
		}
		m.snap.PendingSends = append(m.snap.PendingSends, PendingSend{Send: s, Since: since.UTC()})
		m.st.dirty = true
	}
	return m.settle()
}

// sendsLeft drops the pending sends that left.
func (m *Machine) sendsLeft(ids []string) []Effect {
	for _, id := range ids {
		m.dropPending(id)
	}
	return m.settle()
}

// settle commits a change made outside a boundary now when nothing is in
// flight (else the next boundary carries it).
func (m *Machine) settle() []Effect {
	if m.busy() || !m.st.changed() {
		return nil
	}
	return m.advance()
}

// awaits reports whether an active handle waits for delegation id.
func (m *Machine) awaits(id string) bool {
	return slices.ContainsFunc(m.snap.Handles, func(h Handle) bool { return h.State == wire.HandleActive && h.CommandID == id })
}

func (m *Machine) pendingIndex(id string) int {
	return slices.IndexFunc(m.snap.PendingSends, func(p PendingSend) bool { return p.Send.Command.ID == id })
}

// dropPending forgets the pending send of delegation id, if any.
func (m *Machine) dropPending(id string) bool {
	i := m.pendingIndex(id)
	if id == "" || i < 0 {
		return false
	}
	m.snap.PendingSends = slices.Delete(m.snap.PendingSends, i, i+1)
	if len(m.snap.PendingSends) == 0 {
		m.snap.PendingSends = nil
	}
	m.st.dirty = true
	return true
}

// abandonPending settles handle i, whose child was never created, when
// its turn is cancelled: the pending send is dropped, child.completed
// {outcome: cancelled} recorded, and the handle closed (the end it sends
// reaches the child only if a creation in flight made one).
func (m *Machine) abandonPending(i int) bool {
	h := &m.snap.Handles[i]
	if !m.dropPending(h.CommandID) {
		return false
	}
	m.emit(wire.ChildCompleted{Handle: h.Handle, ChildSessionID: h.ChildSessionID, TurnID: NoChildTurn, Outcome: wire.ChildCancelled})
	m.closeHandle(i)
	return true
}

// unsent is the last commit's sends less the pending ones (which the
// driver retries by themselves).
func (m *Machine) unsent() []Send {
	return slices.DeleteFunc(slices.Clone(m.snap.Sends), func(s Send) bool { return m.pendingIndex(s.Command.ID) >= 0 })
}
