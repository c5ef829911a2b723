package pool

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// The intent rule (docs/architecture.md, "Asking a session for
// something"): an operation on a session an owner runs is an inbox
// command. It reaches the running step at once — a cancel interrupts a
// 10 s step within seconds, a pause sent mid-step applies at the step's
// boundary after the step's commit lands — and never fences the owner:
// the run, its epoch and its process stay, and no CAS of the owner's lost.
func TestIntentReachesRunningStepWithoutFencing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	p := e.owner("v1", "p1", func(c *Config) { c.Registerer = reg })
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("hello"))
	e.WaitOutput(id, "hello")
	run := e.Record(id).Record

	e.Send(id, harness.Deliver("/sleep 10s"))
	e.WaitKind(id, wire.EventTurnStarted, 2)
	sent := time.Now()
	e.Send(id, harness.Control(wire.KindCancel))
	e.WaitKind(id, wire.EventTurnCancelled, 1)
	if d := time.Since(sent); d > 5*time.Second {
		t.Fatalf("cancel took %s: it did not reach the running step", d)
	}

	e.Send(id, harness.Deliver("/sleep 1s"))
	e.WaitKind(id, wire.EventTurnStarted, 3)
	e.Send(id, harness.Control(wire.KindPause))
	evs := e.WaitKind(id, wire.EventSessionPaused, 1)
	e.CheckStream(evs)
	if got := e.StepKeys(evs); len(got) == 0 || got[len(got)-1] != "t3/1" {
		t.Fatalf("steps %q: the running step's commit did not land before the pause", got)
	}
	after := e.Record(id).Record
	if after.Epoch != run.Epoch || after.OwnerRunID != run.OwnerRunID || after.OwnerProcess != "p1" {
		t.Fatalf("ownership moved: epoch %d → %d, run %s → %s, process %s", run.Epoch, after.Epoch, run.OwnerRunID, after.OwnerRunID, after.OwnerProcess)
	}
	if st := p.Owner.Stats(); st.Fences != 0 {
		t.Fatalf("the owner fenced itself %d times", st.Fences)
	}
	for k, v := range gather(t, reg) {
		if strings.HasPrefix(k, "baton_owner_cas_conflicts_total") && v != 0 {
			t.Fatalf("%s = %v: a CAS of the owner lost", k, v)
		}
	}
}
