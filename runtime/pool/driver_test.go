package pool

import (
	"slices"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
)

func TestEchoEndToEnd(t *testing.T) {
	e := newEnv(t)
	e.owner("v1", "p1")
	r := e.Start("v1")
	if !r.Created || r.SessionID == "" {
		t.Fatalf("start: %+v", r)
	}
	e.Send(r.SessionID, harness.Deliver("hello"))
	evs := e.WaitEvents(r.SessionID, 10*time.Second, "echo", func(evs []wire.Event) bool {
		return slices.Contains(harness.Outputs(evs), "hello")
	})
	applied := e.CheckStream(evs)
	if len(applied) != 1 || evs[0].Kind != wire.EventSessionStarted {
		t.Fatalf("events: %+v", evs)
	}
}
