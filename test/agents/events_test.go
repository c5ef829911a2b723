package agents

import (
	"fmt"
	"slices"
	"strings"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
)

// events is session sid's events read so far, without re-published copies,
// in seq order.
func (w *world) events(sid string) []wire.Event {
	w.t.Helper()
	evs, _, err := harness.Dedupe(w.tail.Events(sid))
	w.h.Check(err)
	return evs
}

// turnEnded reports whether the command at inbox seq was applied and a
// turn ended after it, with no turn of the session left open: its turn
// (a delivery is applied as it starts its turn) has ended.
func turnEnded(evs []wire.Event, seq uint64, settled bool) bool {
	i := slices.IndexFunc(evs, harness.IsAppliedSeq(seq))
	if i < 0 || !settled {
		return false
	}
	return slices.ContainsFunc(evs[i+1:], func(e wire.Event) bool {
		return e.Kind == wire.EventTurnCompleted || e.Kind == wire.EventTurnCancelled
	})
}

// waitDone waits until the delivery at inbox seq of sid is applied and its
// turn has ended: the session is idle again.
func (w *world) waitDone(sid string, seq uint64) {
	w.t.Helper()
	w.h.Eventually(wait, fmt.Sprintf("delivery seq %d of %s done", seq, sid), func() bool {
		return turnEnded(w.tail.Events(sid), seq, w.tail.Settled(sid))
	})
}

// waitAllDone waits until every session's deliveries (inbox seqs) are
// done — its last one's turn ended — and checks that each was applied
// exactly once.
func (w *world) waitAllDone(sent map[string][]uint64) {
	w.t.Helper()
	for sid, seqs := range sent {
		w.waitDone(sid, slices.Max(seqs))
		applied := map[uint64]int{}
		for _, a := range harness.AllData[wire.CommandApplied](w.t, w.events(sid), wire.EventCommandApplied) {
			applied[a.Seq]++
		}
		for _, seq := range seqs {
			if applied[seq] != 1 {
				w.t.Fatalf("session %s: the delivery at seq %d applied %d times, want once", sid, seq, applied[seq])
			}
		}
	}
}

// handoffs are session sid's handoff.completed events, in order.
func (w *world) handoffs(sid string) []wire.HandoffCompleted {
	w.t.Helper()
	return harness.AllData[wire.HandoffCompleted](w.t, w.events(sid), wire.EventHandoffCompleted)
}

// handoffKinds lists session sid's handoff.* events, for failure messages
// and the check that none happened.
func handoffKinds(evs []wire.Event) []string {
	var out []string
	for _, e := range evs {
		if strings.HasPrefix(e.Kind, "handoff.") {
			out = append(out, fmt.Sprintf("%d:%s", e.Seq, e.Kind))
		}
	}
	return out
}

// route renders handoffs as from→to, for logs.
func route(hs []wire.HandoffCompleted) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = h.FromDeploymentID + "→" + h.ToDeploymentID
	}
	return strings.Join(parts, ", ")
}
