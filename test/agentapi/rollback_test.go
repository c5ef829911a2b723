package agentapi_test

import (
	"github.com/baton-rt/baton/internal/failpoint"
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/wire"
)

// A rollback to a deployment of the previous state version (v1 here reads
// state versions up to 2, as the build before the agent API did): a session
// that used nothing new — plain text, the agent's plain answers, no usage —
// is written at an old version and moves; one with tool calls in its
// history is written at version 3, and the old deployment refuses it
// before it activates: handoff.failed, and the session stays where it was
// and answers the trigger there.
func TestRollbackToPreviousStateVersion(t *testing.T) {
	e := newEnv(t)
	e.owner("v1", "old", func(c *pool.Config) { c.Failpoints = failpoint.New().Set(failpoint.ReadStateVersion, 2) })
	e.owner("v2", "new")

	plain := e.create("v2")
	e.say("v2", plain, "/plain hello") // echoed with usage: see below
	e.turns(plain, 1)

	rich := e.create("v2")
	e.say("v2", rich, "/tool weather")
	e.turns(rich, 1)

	for _, id := range []string{plain, rich} {
		e.say("v1", id, "rolled back?")
	}
	evs := e.turns(rich, 2)
	if n := harness.Count(evs, wire.EventHandoffFailed); n != 1 {
		t.Fatalf("rich session: %d handoff.failed, want 1 (kinds %v)", n, harness.Kinds(evs))
	}
	if st := e.status(rich); st.DeploymentID != "v2" {
		t.Fatalf("rich session moved to %s", st.DeploymentID)
	}
	evs = e.turns(plain, 2)
	if n := harness.Count(evs, wire.EventHandoffCompleted); n != 1 {
		t.Fatalf("plain session: %d handoff.completed, want 1 (kinds %v)", n, harness.Kinds(evs))
	}
	if st := e.status(plain); st.DeploymentID != "v1" {
		t.Fatalf("plain session stayed on %s", st.DeploymentID)
	}
}
