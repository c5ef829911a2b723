package runtime_test

import (
	"testing"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// An operator's end of a session no agent runs tells its family what the
// session's own end would: `end` to each open child (a closed handle's is
// left alone) with the close IDs the machine uses, and the live delegated
// turn's cancelled result, ended terminated, to the parent. An ended
// snapshot sends nothing.
func TestTerminateSends(t *testing.T) {
	cfg := runtime.Config{SessionID: "S1", RunID: "finish-1", Deployment: "v1"}
	snap := runtime.Snapshot{
		Handles: []runtime.Handle{
			{Handle: "h1", Generation: 1, ChildSessionID: "K1", DeploymentID: "v1", State: wire.HandleParked},
			{Handle: "h2", Generation: 2, ChildSessionID: "K2", DeploymentID: "v2", State: wire.HandleActive, TurnID: "t1", CommandID: "c1", Wait: true},
			{Handle: "h3", Generation: 1, ChildSessionID: "K3", DeploymentID: "v1", State: wire.HandleClosed},
		},
		Parent: &runtime.ParentRef{SessionID: "P", Handle: "me", Depth: 1},
		Turn:   &runtime.Turn{ID: "t1", Open: true, Delegated: true, CommandID: "pc1", Outputs: []string{"half"}},
	}
	sends, err := runtime.Terminate(cfg, snap, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"K1": wire.CloseCommandID("S1", "h1", 1),
		"K2": wire.CloseCommandID("S1", "h2", 2),
		"P":  wire.ResultCommandID("S1", "t1"),
	}
	if len(sends) != len(want) {
		t.Fatalf("sends %+v, want %d", sends, len(want))
	}
	for _, s := range sends {
		c := s.Command
		if want[s.SessionID] != c.ID {
			t.Fatalf("send to %s: id %q, want %q", s.SessionID, c.ID, want[s.SessionID])
		}
		switch s.SessionID {
		case "P":
			r := c.ChildResult
			if c.Kind != wire.KindChildResult || r == nil || r.Outcome != wire.ChildCancelled || r.Ended != wire.EndTerminated ||
				r.CommandID != "pc1" || len(r.Outputs) != 1 {
				t.Fatalf("to the parent: %+v %+v", c, r)
			}
		default:
			if c.Kind != wire.KindEnd || c.ParentSessionID != "S1" || c.Depth != 2 || c.AcceptedDeploymentID != "v1" {
				t.Fatalf("to child %s: %+v", s.SessionID, c)
			}
		}
	}
	snap.Ended = runtime.EndDone
	if sends, err := runtime.Terminate(cfg, snap, time.Now()); err != nil || len(sends) != 0 {
		t.Fatalf("an ended session sends %+v, %v", sends, err)
	}
}
