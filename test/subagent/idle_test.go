package subagent

import (
	"slices"
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// A parent whose child runs a delegated turn is not idle: a delivery
// accepted by v2 does not hand it off (handoff.skipped reason child, data
// version 2). Once the child settled, the next v2 delivery moves the
// parent to v2 while its child stays on v1; a /continue delivered to the
// parent on v2 runs in the child on v1 (a parent's delivery never moves
// its child) and its result reaches the parent on v2 (a child's result
// never moves its parent back).
func TestActiveChildKeepsParent(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.owner("v1", "p1")
	w.owner("v2", "p2")
	parent := w.start("v1")
	kid := child(parent, "r", 1)

	w.Send(parent, stamped("spawn", "v1", "/spawn r /sleep 2s"))
	w.WaitKind(parent, wire.EventChildStarted, 1)
	w.waitExec(kid, "t1/1", "p1") // the child's sleep step runs
	w.Send(parent, stamped("during", "v2", "during the child"))
	evs := w.WaitKind(parent, wire.EventHandoffSkipped, 1)
	sk := skips(t, evs)
	if sk[0] != (wire.HandoffSkippedV2{Reason: wire.SkipChild, CommandID: "during", Seq: sk[0].Seq, DeploymentID: "v1", TargetDeploymentID: "v2"}) {
		t.Fatalf("handoff.skipped %+v, want reason child for the v2 delivery", sk[0])
	}
	if v := eventV(evs, wire.EventHandoffSkipped); v != 2 {
		t.Fatalf("handoff.skipped data version %d, want 2", v)
	}

	// The child settles; its result and the queued delivery are answered
	// on v1.
	evs = w.WaitFor(parent, "the child's result and the queued delivery answered", func(evs []wire.Event) bool {
		return harness.OutputCommitted("child r: /sleep 2s")(evs) && harness.OutputCommitted("during the child")(evs) && settled(evs)
	})
	if n := harness.Count(evs, wire.EventHandoffStarted); n != 0 {
		t.Fatalf("%d handoff.started while the child ran: %s", n, harness.Trace(evs))
	}
	w.waitHandle(parent, "r", wire.HandleParked)
	if r := w.Record(parent).Record; r.DeploymentID != "v1" {
		t.Fatalf("parent moved to %s while its child ran", r.DeploymentID)
	}

	// Idle now: the next v2 delivery moves the parent, not the child.
	w.Send(parent, stamped("move", "v2", "moved"))
	w.WaitOutput(parent, "moved")
	w.WaitRecord(parent, func(r record.SessionRecord) bool { return r.DeploymentID == "v2" && r.OwnerProcess == "p2" })
	if r := w.Record(kid).Record; r.DeploymentID != "v1" || r.OwnerProcess != "p1" {
		t.Fatalf("child on %s/%s after its parent moved, want v1/p1", r.DeploymentID, r.OwnerProcess)
	}

	// The parent on v2 continues the child on v1.
	w.Send(parent, stamped("again", "v2", "/continue r again"))
	evs = w.WaitFor(parent, "the continued child's result on v2", func(evs []wire.Event) bool {
		return harness.OutputCommitted("child r: again")(evs) && settled(evs)
	})
	if e, _ := harness.Find(evs, harness.IsOutput("child r: again")); e.DeploymentID != "v2" {
		t.Fatalf("child r: again answered on %s, want v2", e.DeploymentID)
	}
	w.waitHandle(parent, "r", wire.HandleParked)
	if r := w.Record(parent).Record; r.DeploymentID != "v2" {
		t.Fatalf("parent on %s after its child's result, want v2", r.DeploymentID)
	}
	kevs := w.WaitFor(kid, "the child's second turn settled", func(evs []wire.Event) bool {
		return harness.OutputCommitted("again")(evs) && settled(evs)
	})
	if r := w.Record(kid).Record; r.DeploymentID != "v1" || r.OwnerProcess != "p1" {
		t.Fatalf("child on %s/%s after a delivery its v2 parent sent, want v1/p1", r.DeploymentID, r.OwnerProcess)
	}
	if n := harness.Count(kevs, wire.EventHandoffStarted) + harness.Count(kevs, wire.EventHandoffSkipped); n != 0 {
		t.Fatalf("the parent's delivery was a handoff trigger for the child: %s", harness.Trace(kevs))
	}
	for _, e := range kevs {
		if e.DeploymentID != "v1" {
			t.Fatalf("child event %d %s on %s", e.Seq, e.Kind, e.DeploymentID)
		}
	}
	done := harness.AllData[wire.ChildCompleted](t, evs, wire.EventChildCompleted)
	if len(done) != 2 || done[0].TurnID == done[1].TurnID {
		t.Fatalf("child.completed %+v, want one for each delegated turn", done)
	}
	if got := harness.Outputs(kevs); !slices.Equal(got, []string{"/sleep 2s", "again"}) {
		t.Fatalf("child outputs %q", got)
	}
	w.check(parent, evs, "")
	w.check(kid, kevs, "")
	if n := harness.Count(evs, wire.EventChildStarted); n != 1 {
		t.Fatalf("%d child.started, want 1 (the continue reuses the child)", n)
	}
}
