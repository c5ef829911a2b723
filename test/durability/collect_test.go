package durability_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/wire"
)

// An owner process SIGKILLed after a commit that no longer refers to the
// session's previous state, before that state's blob is deleted: the
// orphan stays until the next claim, which finds it in the blob inventory
// and deletes it. Afterwards the session stores exactly the blobs its
// checkpoint, history and events refer to, object by object.
func TestKillBetweenCommitAndCollect(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	// Turn 1 stores a state blob; turn 2's fold replaces it (the first
	// commit that lets a blob go) and turn 3's fold is the second: the
	// kill leaves turn 2's state behind.
	a := c.owner("a", "--fault", "crash-before-collect:2")
	id := c.start(protocol.StartRequest{})
	c.owner("b")
	for i := 1; i <= 3; i++ {
		c.send(id, harness.WithID(fmt.Sprintf("s%d", i), harness.Deliver(fmt.Sprintf("/bigstate %d", 140000+i))))
		if i < 3 {
			c.waitKind(id, wire.EventTurnCompleted, i)
		}
	}
	c.send(id, harness.WithID("out", harness.Deliver("/big 9000")))
	a.Wait(t, wait) // killed at the fault point
	rec := c.waitOwner(id, "b")
	evs := c.waitKind(id, wire.EventTurnCompleted, 4)
	b := c.blobs(id, evs)
	if ok, diff := b.Exact(); !ok {
		t.Fatalf("after the kill and b's claim (epoch %d), the session stores other blobs than it refers to:\n%s", rec.Epoch, strings.Join(diff, "\n"))
	}
	if len(b.Stored) != 2 {
		t.Fatalf("stored %v, want the last state and the /big output", b.Stored)
	}
}

// blobs reads what session id stores and refers to (evs: its events).
func (c *cluster) blobs(id string, evs []wire.Event) harness.SessionBlobs {
	c.t.Helper()
	cp, err := wire.DecodeCheckpoint(c.record(id).Checkpoint)
	c.h.Check(err)
	b, err := harness.ReadSessionBlobs(c.t.Context(), c.JS, c.Names, id, cp, evs)
	c.h.Check(err)
	return b
}
