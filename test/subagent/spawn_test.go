package subagent

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// /spawn r hello on a v1 parent creates exactly one child session on v1,
// under its derived ID and alias, whose checkpoint names the parent; the
// child runs "hello", its result comes back once ("child r: hello") and
// the handle parks. The same command delivered again — the same message ID
// (deduplicated by the inbox stream) and the same command ID under another
// message ID (deduplicated by the session's applied IDs) — creates no
// second child.
func TestSpawnCreatesOneChild(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.owner("v1", "p1")
	parent := w.start("v1")
	kid := child(parent, "r", 1)

	spawn := stamped("spawn", "v1", "/spawn r hello")
	sent, _, err := w.Env.Send(w.Context(), subjects.StableToken(parent), spawn)
	w.Check(err)
	w.Send(parent, spawn)
	w.republish(parent, sent, "spawn-copy")
	w.WaitOutput(parent, "child r: hello")
	w.Send(parent, stamped("after", "v1", "after"))
	evs := w.WaitFor(parent, "after answered and settled", func(evs []wire.Event) bool {
		return harness.OutputCommitted("after")(evs) && settled(evs)
	})

	if got := harness.Outputs(evs); !slices.Equal(got, []string{"/spawn r hello", "child r: hello", "after"}) {
		t.Fatalf("parent outputs %q", got)
	}
	if applied := w.check(parent, evs, ""); count(applied, "spawn") != 1 {
		t.Fatalf("parent applied %v: the spawn once", applied)
	}
	started := harness.AllData[wire.ChildStarted](t, evs, wire.EventChildStarted)
	if len(started) != 1 || started[0] != (wire.ChildStarted{Handle: "r", ChildSessionID: kid, DeploymentID: "v1"}) {
		t.Fatalf("child.started %+v, want one for r → %s on v1", started, kid)
	}
	done := harness.AllData[wire.ChildCompleted](t, evs, wire.EventChildCompleted)
	if len(done) != 1 || done[0].Handle != "r" || done[0].ChildSessionID != kid || done[0].Outcome != wire.ChildDone || done[0].TurnID == "" {
		t.Fatalf("child.completed %+v", done)
	}
	if h := w.waitHandle(parent, "r", wire.HandleParked); h.ChildSessionID != kid || h.Generation != 1 || h.DeploymentID != "v1" {
		t.Fatalf("handle r %+v", h)
	}

	// The child: on v1, its parent recorded, the delegation applied once.
	if kids := w.children(parent); !slices.Equal(kids, []string{kid}) {
		t.Fatalf("children of %s: %v, want [%s]", parent, kids, kid)
	}
	rec, snap := w.checkpoint(kid)
	if rec.DeploymentID != "v1" || snap.Parent == nil || *snap.Parent != (wire.ParentRef{SessionID: parent, Handle: "r", Depth: 1}) {
		t.Fatalf("child record on %s, parent %+v", rec.DeploymentID, snap.Parent)
	}
	if hook, ok := w.Hook(wire.ChildAlias(parent, "r", 1)); !ok || hook.SessionID != kid {
		t.Fatalf("alias %s: hook %+v %v, want session %s", wire.ChildAlias(parent, "r", 1), hook, ok, kid)
	}
	kevs := w.WaitFor(kid, "the child's turn settled", settled)
	applied := w.check(kid, kevs, "")
	if len(applied) != 1 || !strings.HasSuffix(applied[0], "/delegate") || !strings.HasPrefix(applied[0], parent+"/") {
		t.Fatalf("child applied %v, want the one delegation", applied)
	}
	if got := harness.Outputs(kevs); !slices.Equal(got, []string{"hello"}) {
		t.Fatalf("child outputs %q", got)
	}
	if done[0].TurnID != harness.FirstData[wire.TurnStarted](t, kevs, wire.EventTurnStarted).TurnID {
		t.Fatalf("child.completed names turn %s, the child's turn is another", done[0].TurnID)
	}
}

// republish publishes the command c again to the session's inbox under
// another message ID, so only the session's own deduplication stops it.
func (w *world) republish(id string, c wire.Command, msgID string) {
	w.t.Helper()
	data, err := wire.Encode(wire.Current(), c)
	w.Check(err)
	ctx, cancel := context.WithTimeout(w.Context(), 5*time.Second)
	defer cancel()
	_, err = w.JS.Publish(ctx, w.Names.Inbox(subjects.StableToken(id)), data, jetstream.WithMsgID(msgID))
	w.Check(err)
}
