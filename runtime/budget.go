package runtime

import (
	"encoding/json"
	"slices"

	"github.com/baton-rt/baton/wire"
)

// A boundary admits commands up to a budget of what they add to its commit
// (docs/runtime.md R3): the events they record in the outbox, the inputs
// they add to turn.inputs, the commands they send, and the applied set's
// growth above its lowest unapplied sequence — each estimated as the
// checkpoint stores it. Whatever does not fit stays queued, in order, for
// the next boundary, which runs as soon as the commit lands. cancel, reset
// and clear draw on a reserve beyond the budget, and the first of them a
// boundary meets always applies.

// Estimates of the stored size of what a boundary adds. They err on the
// large side: an event envelope's fixed members (the keys, a nanosecond
// time stamp, a 20-digit seq, the data version), a reference to text
// stored out of line, one applied sequence with its separator.
const (
	envelopeBytes = 160
	blobRefBytes  = 256
	seqBytes      = 21
)

// budget is one boundary's account. The zero value has nothing counted.
type budget struct {
	used      int    // estimated bytes the boundary's admissions add
	events    int    // m.st.events counted (the folded step's are not)
	sends     int    // m.st.sends counted
	inputs    int    // inputs of the open turn counted
	turn      string // the turn whose inputs are counted
	turnBytes int    // their estimated stored size
	above     int    // applied sequences above the lowest unapplied one, at the start
	priority  bool   // a cancel, reset or clear was admitted
	deferred  uint64 // the first immediate command left for the next boundary (0: none)
	unlimited bool   // test-only: no budget (broken.noBudget)
}

// openBudget starts the boundary's account after the step is folded: only
// what the admitted commands add is counted.
func (m *Machine) openBudget() {
	m.bud = budget{events: len(m.st.events), sends: len(m.st.sends), above: m.appliedAbove(), unlimited: isBroken(broken.noBudget, m)}
	if t := m.snap.Turn; t != nil {
		m.bud.turn, m.bud.inputs, m.bud.turnBytes = t.ID, len(t.Inputs), turnInputBytes(t)
	}
}

// charge counts what the commands admitted since the last charge added.
func (m *Machine) charge() {
	b := &m.bud
	for ; b.events < len(m.st.events); b.events++ {
		b.used += m.eventBytes(m.st.events[b.events])
	}
	for ; b.sends < len(m.st.sends); b.sends++ {
		b.used += jsonBytes(m.st.sends[b.sends])
	}
	b.used += m.chargeInputs()
	if n := m.appliedAbove(); n > b.above {
		b.used += (n - b.above) * seqBytes
		b.above = n
	}
}

// chargeInputs counts the inputs the open turn gained since the last charge.
func (m *Machine) chargeInputs() int {
	t, b := m.snap.Turn, &m.bud
	if t == nil {
		b.turn, b.inputs, b.turnBytes = "", 0, 0
		return 0
	}
	if t.ID != b.turn || len(t.Inputs) < b.inputs {
		b.turn, b.inputs, b.turnBytes = t.ID, 0, 0
	}
	n := 0
	for ; b.inputs < len(t.Inputs); b.inputs++ {
		n += inputBytes(t.Inputs[b.inputs])
	}
	b.turnBytes += n
	return n
}

// roomFor reports whether c may be admitted now. cancel, reset and clear
// draw on the reserve (the first of them always fits); any other command
// needs the budget. Once an immediate command is left for the next
// boundary, no later immediate command but cancel and reset passes it, and
// no FIFO command is admitted — immediate commands apply ahead of queued
// FIFO ones — except a clear that precedes it in the inbox.
func (b *budget) roomFor(c *Command) bool {
	if b.unlimited {
		return true
	}
	if b.deferred != 0 {
		clearsFirst := c.Kind == KindClear && c.Seq < b.deferred
		if classOf(c) == classFIFO && !clearsFirst || classOf(c) == classImmediate && !priority(c) {
			return false
		}
	}
	if priority(c) {
		return !b.priority || b.used < wire.MaxBoundaryBytes+wire.BoundaryReserveBytes
	}
	return b.used < wire.MaxBoundaryBytes
}

// deferFrom notes an immediate command left for the next boundary.
func (b *budget) deferFrom(seq uint64) {
	if b.deferred == 0 {
		b.deferred = seq
	}
}

// admitted notes an admitted command.
func (b *budget) admitted(c *Command) {
	if priority(c) {
		b.priority = true
	}
}

// priority reports the commands a flood never defers past the next
// boundary: cancel, reset and clear.
func priority(c *Command) bool {
	switch c.Kind {
	case KindCancel, KindReset, KindClear:
		return !declined(c)
	}
	return false
}

// appliedAbove counts the applied sequences the commit will hold above its
// lowest unapplied one (the queue's head).
func (m *Machine) appliedAbove() int {
	if len(m.queue) == 0 {
		return 0
	}
	a := m.snap.Applied.Above
	i, _ := slices.BinarySearch(a, m.queue[0].Seq)
	return len(a) - i
}

// eventBytes estimates an event as the checkpoint's outbox stores it.
func (m *Machine) eventBytes(e Event) int {
	return envelopeBytes + len(m.cfg.SessionID) + len(m.cfg.RunID) + len(m.cfg.Deployment) +
		len(e.Kind) + max(len(e.Data), 2)
}

// inputBytes estimates an admitted command as turn.inputs stores it: a text
// or payloads longer than wire.MaxInlineTextBytes by reference.
func inputBytes(c Command) int {
	n := 0
	if len(c.Text) > wire.MaxInlineTextBytes {
		c.Text, n = "", blobRefBytes
	}
	if c.Payloads != nil {
		if p := jsonBytes(c.Payloads); p > wire.MaxInlineTextBytes {
			c.Payloads, n = nil, n+blobRefBytes
		}
	}
	return n + jsonBytes(c)
}

// turnInputBytes is the estimated stored size of a turn's inputs.
func turnInputBytes(t *Turn) int {
	n := 0
	for _, c := range t.Inputs {
		n += inputBytes(c)
	}
	return n
}

func jsonBytes(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return blobRefBytes
	}
	return len(b)
}
