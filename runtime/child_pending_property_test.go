package runtime_test

import (
	"encoding/json"
	"slices"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"pgregory.net/rapid"
)

// Pending child sends in TestChildProperties: the driver reports the last
// landed commit's child-creating sends pending (their deployment has no
// live owner), reports one that left, or fails one with child_unavailable
// (a failed child.result to the parent's own inbox).

// pendingAct plays the driver's side of pending sends.
func (w *cworld) pendingAct(a string) {
	switch a {
	case "pendsend":
		if slices.ContainsFunc(w.committed.Sends, func(s runtime.Send) bool { return s.Alias != "" }) {
			w.handle(runtime.SendsPending{Sends: w.committed.Sends})
		}
	case "left":
		if ps := w.committed.PendingSends; len(ps) > 0 {
			id := rapid.SampledFrom(ps).Draw(w.t, "left").Send.Command.ID
			w.left[id] = true
			w.handle(runtime.SendsLeft{IDs: []string{id}})
		}
	case "unavailable":
		if ps := w.committed.PendingSends; len(ps) > 0 {
			s := rapid.SampledFrom(ps).Draw(w.t, "unavailable").Send
			ref := &wire.ChildRef{Handle: s.Command.Handle, SessionID: s.SessionID, CommandID: s.Command.ID, TurnID: runtime.NoChildTurn,
				Outcome: wire.ChildFailed, Error: wire.ChildErrorText(wire.CodeChildUnavailable, "no owner"), Ended: "unavailable"}
			w.recv(runtime.KindChildResult, func(c *runtime.Command) { c.Child = ref })
		}
	}
}

// unpending is the committed sends a boot sends again: those not pending.
func unpending(s runtime.Snapshot) []runtime.Send {
	return slices.DeleteFunc(slices.Clone(s.Sends), func(x runtime.Send) bool {
		return slices.ContainsFunc(s.PendingSends, func(p runtime.PendingSend) bool { return p.Send.Command.ID == x.Command.ID })
	})
}

// checkPending: (p) every pending send creates the child of a handle that
// is active with that delegation, once, and keeps its start; one leaves
// the checkpoint only when the driver reported it left or its handle no
// longer waits for it (a result, a cancel, a close), and then the commit
// records why (child.completed or child.closed) unless it left.
func (w *cworld) checkPending(prev, post runtime.Snapshot) {
	seen := map[string]bool{}
	for _, p := range post.PendingSends {
		id := p.Send.Command.ID
		w.require(!seen[id], "pending send %s twice", id)
		seen[id] = true
		w.require(p.Send.Alias != "" && !p.Since.IsZero(), "pending send %+v: no alias or start", p)
		i := slices.IndexFunc(post.Handles, func(h runtime.Handle) bool { return h.State == wire.HandleActive && h.CommandID == id })
		w.require(i >= 0, "pending send %s for no active handle: %+v", id, post.Handles)
		if j := slices.IndexFunc(prev.PendingSends, func(o runtime.PendingSend) bool { return o.Send.Command.ID == id }); j >= 0 {
			w.require(prev.PendingSends[j].Since.Equal(p.Since), "pending send %s restarted its timeout", id)
		} else {
			cCoverage.add("pending")
		}
	}
	for _, p := range prev.PendingSends {
		id := p.Send.Command.ID
		if seen[id] {
			continue
		}
		if w.left[id] {
			cCoverage.add("left")
			continue
		}
		h := p.Send.Command.Handle
		settled := slices.ContainsFunc(post.Outbox, func(e runtime.Event) bool {
			return (e.Kind == runtime.EventChildCompleted || e.Kind == runtime.EventChildClosed) && handleOf(e) == h
		})
		w.require(settled, "pending send %s dropped without a result, cancel or close of %q", id, h)
		for _, e := range post.Outbox {
			if e.Kind == runtime.EventChildCompleted && handleOf(e) == h {
				cCoverage.add(map[bool]string{true: "unavailable", false: "pending settled"}[e.V == 2])
			}
		}
	}
}

func handleOf(e runtime.Event) string {
	var d struct {
		Handle string `json:"handle"`
	}
	_ = json.Unmarshal(e.Data, &d)
	return d.Handle
}
