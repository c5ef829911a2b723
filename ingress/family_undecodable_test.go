package ingress_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/wire"
)

// A parent whose checkpoint no build can decode (not even a checkpoint
// object) is quarantined at its first attempt; an operator's end of it
// still ends its two children, found by their alias hooks: each gets
// session.ended {closed} and its record ends.
func TestEndUndecodableParentEndsChildren(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1", quarantining, func(c *pool.Config) { c.QuarantineAfter = 1 })
	id := e.create(`{"alias":"undecodable-parent","text":"/spawnbg r1 one"}`).SessionID
	e.deliver(`{"alias":"undecodable-parent","text":"/spawnbg r2 two"}`)
	kids := []string{wire.ChildSessionID(id, "r1", 1), wire.ChildSessionID(id, "r2", 1)}
	e.waitEvents(id, "both results back", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventChildCompleted) == 2 })
	for i, text := range []string{"one", "two"} {
		e.waitEvents(kids[i], text, func(evs []wire.Event) bool { return slices.Contains(harness.Outputs(evs), text) })
	}
	e.waitState(id, record.StateHibernated)
	e.rewrite(id, func([]byte) []byte { return []byte(`"not a checkpoint"`) })
	e.deliver(`{"alias":"undecodable-parent","text":"wake"}`)
	e.waitState(id, record.StateQuarantined)

	var end ingress.Ended
	e.mustAdmin(http.MethodPost, "/v1/admin/sessions/"+id+"/end", ``, http.StatusOK, &end)
	if !slices.Equal(end.ChildrenEnded, kids) {
		t.Fatalf("children ended %v, want %v", end.ChildrenEnded, kids)
	}
	for _, kid := range kids {
		evs := e.waitEvents(kid, "the child's end", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventSessionEnded) == 1 })
		if last := evs[len(evs)-1]; last.Kind != wire.EventSessionEnded || last.V != 3 || string(last.Data) != `{"reason":"closed"}` {
			t.Fatalf("child %s's last event %d %s v%d %s", kid, last.Seq, last.Kind, last.V, last.Data)
		}
		e.waitState(kid, record.StateEnded)
	}
}
