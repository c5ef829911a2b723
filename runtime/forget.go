package runtime

import "slices"

// The applied set stays bounded while a FIFO command waits (docs/runtime.md
// R2): the commands applied above it are recorded one sequence each, so once
// the record holds more than Config.MaxAppliedAbove of them, the commit
// that leaves them there asks the driver to delete them from the inbox
// (Forget, after the commit). Deleted, no cursor can deliver them again, so
// the next commit drops them from the set (Forgotten). The record never
// forgets a sequence the inbox still holds.

// forget returns the Forget of the applied sequences above Applied.Next not
// yet asked for, once the set holds more than its bound.
func (m *Machine) forget() []Effect {
	above := m.snap.Applied.Above
	if len(above) <= m.cfg.MaxAppliedAbove {
		return nil
	}
	var seqs []uint64
	for _, s := range above {
		if !m.forgetting[s] {
			m.forgetting[s] = true
			seqs = append(seqs, s)
		}
	}
	if len(seqs) == 0 {
		return nil
	}
	return []Effect{Forget{Seqs: seqs}}
}

// forgot notes the deleted sequences; a commit drops them at once when the
// machine is not busy, else the next one does. The ones kept are asked for
// again by a later commit.
func (m *Machine) forgot(f Forgotten) []Effect {
	for _, s := range f.Kept {
		delete(m.forgetting, s)
	}
	if len(f.Seqs) == 0 {
		return nil
	}
	m.forgotten = append(m.forgotten, f.Seqs...)
	if m.busy() || m.snap.Ended != "" {
		return nil
	}
	m.st.dirty = true
	return m.advance()
}

// dropForgotten removes the deleted sequences from the applied set.
func (m *Machine) dropForgotten() {
	if len(m.forgotten) == 0 {
		return
	}
	gone := make(map[uint64]bool, len(m.forgotten))
	for _, s := range m.forgotten {
		gone[s] = true
	}
	a := &m.snap.Applied
	a.Above = slices.DeleteFunc(a.Above, func(s uint64) bool { return gone[s] })
	if len(a.Above) == 0 {
		a.Above = nil
	}
	for _, s := range m.forgotten {
		delete(m.forgetting, s)
	}
	m.forgotten = nil
}
