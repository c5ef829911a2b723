package runtime

import "testing"

// traits are what the machine makes of a queued command before it applies it.
type traits struct{ fifo, steer, priority, interrupts, trigger bool }

func (m *Machine) traitsOf(c Command, timer *Timer) traits {
	_, trigger := m.handoffTarget(c)
	m.snap.Timer = timer
	return traits{classOf(&c) == classFIFO, steers(&c), priority(&c), m.interrupts(&c), trigger}
}

// TestDeclinedCommands: a command the machine records but never applies —
// undecodable (Rejected), refused by the owner (Refused) or superseded by
// a newer latest-mode delivery (Superseded) — is, whatever
// its kind, immediate, never a steer, never drawn on the reserve, never
// interrupts a step and is never a handoff trigger; undeclined, every one
// of those traits holds for some kind.
func TestDeclinedCommands(t *testing.T) {
	m, err := NewMachine(Config{SessionID: "s", Deployment: "A", RunID: "r1"}, Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	timer := &Timer{ID: "r1"}
	var some traits
	for _, k := range Kinds() {
		c := Command{Seq: 1, ID: "c1", Kind: k, Mode: ModeSteer, Deployment: "X", Target: "X", TimerID: timer.ID}
		p := m.traitsOf(c, timer)
		some = traits{some.fifo || p.fifo, some.steer || p.steer, some.priority || p.priority,
			some.interrupts || p.interrupts, some.trigger || p.trigger}
		rejected, refused, superseded := c, c, c
		rejected.Rejected, refused.Refused, superseded.Superseded = "wire: unknown version", RejectAgentMismatch, 9
		for name, d := range map[string]Command{"rejected": rejected, "refused": refused, "superseded": superseded} {
			if got := m.traitsOf(d, timer); got != (traits{}) {
				t.Errorf("%s %s: %+v, want none", name, k, got)
			}
		}
	}
	if some != (traits{true, true, true, true, true}) {
		t.Errorf("undeclined commands: %+v, want every trait somewhere", some)
	}
}
