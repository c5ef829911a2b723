package pool

import (
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
)

// An inbox payload that does not decode (a newer wire version, an unknown
// kind, garbage) is recorded as a durable wire.rejected event and never
// applied; the session stays alive and keeps answering.
func TestUndecodableCommandsAreRejectedLoudly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.Start("v1").SessionID
	bad := []string{
		`{"v":2,"kind":"deliver","id":"future-1","acceptedDeploymentId":"v1","acceptedAt":"2026-11-30T00:00:00Z"}`,
		`{"v":1,"kind":"teleport","id":"k-1","acceptedDeploymentId":"v1","acceptedAt":"2026-11-30T00:00:00Z"}`,
		`not json at all`,
	}
	for _, b := range bad {
		if _, err := e.JS.Publish(t.Context(), e.Names.Inbox(id), []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	e.Send(id, harness.WithID("after", harness.Deliver("still alive")))
	evs := e.WaitOutput(id, "still alive")
	rejects := harness.AllData[wire.WireRejected](t, evs, wire.EventWireRejected)
	if len(rejects) != len(bad) {
		t.Fatalf("%d wire.rejected events, want %d: %v", len(rejects), len(bad), harness.Kinds(evs))
	}
	if rejects[0].CommandID != "future-1" || rejects[0].Reason == "" {
		t.Fatalf("first rejection: %+v", rejects[0])
	}
	applied := harness.ByID(e.CheckStream(evs))
	for _, id := range []string{"future-1", "k-1"} {
		if _, ok := applied[id]; ok {
			t.Fatalf("rejected command %s was applied", id)
		}
	}
	if _, ok := applied["after"]; !ok {
		t.Fatal("the delivery after the rejections was not applied")
	}
}
