package pool

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/wire"
)

// An owner process stopped cleanly mid-session (a /sleep step running,
// deliveries queued) is succeeded by a new owner with the same process ID,
// which resumes from its index: epoch+1, every command applied once, every
// echo once, seq contiguous, and no committed step re-run — only the step
// that was interrupted before its commit runs again.
func TestRestartResumesFromIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.owner("v1", "p1")
	id := e.StartWith(protocol.StartRequest{DeploymentID: "v1", Aliases: []string{"restart-alias"}, Timeout: "1h"}).SessionID

	e.Send(id, harness.Deliver("warm up"))
	e.WaitOutput(id, "warm up")
	e.Send(id, harness.Deliver("/sleep 1s"))
	want := []string{"warm up", "/sleep 1s"}
	for i := range 6 {
		addr := id
		if i%2 == 1 {
			addr = "restart-alias"
		}
		text := fmt.Sprintf("queued %d", i)
		e.Send(addr, harness.Deliver(text))
		want = append(want, text)
	}
	// Stop while the sleep step runs: its turn has started, its step is
	// not committed.
	e.WaitKind(id, wire.EventTurnStarted, 2)
	epoch1, _ := e.session(id)
	_ = first.Stop()
	if slices.Contains(first.Loaded(), id) {
		t.Fatal("the stopped owner still runs the session")
	}
	// Stop flushed every committed event: the stream now shows exactly the
	// steps the first run committed. Normally the stop interrupts the 1 s
	// step before its commit; on a slow machine (events are appended in the
	// background, so the test may see turn.started late) a later step may
	// be the one cut short, or none.
	stopped := e.Events(id)
	var interruptedKey string
	if runs := e.log.Entries(); len(runs) > 0 {
		if last := runs[len(runs)-1]; !slices.Contains(e.StepKeys(stopped), last.StepKey) {
			interruptedKey = last.StepKey
		}
	}
	if interruptedKey != "t2/1" {
		t.Logf("the step cut short by the stop: %q", interruptedKey)
	}

	e.owner("v1", "p1")
	evs := e.WaitFor(id, "every queued delivery answered", func(evs []wire.Event) bool {
		return len(harness.Outputs(evs)) >= len(want) && harness.Count(evs, wire.EventSessionWaiting) >= len(want)
	})
	applied := e.CheckStream(evs)
	if len(applied) != len(want) {
		t.Fatalf("%d commands applied, want %d", len(applied), len(want))
	}
	if got := harness.Outputs(evs); !slices.Equal(got, want) {
		t.Fatalf("outputs %q, want %q", got, want)
	}
	for i, ev := range stopped {
		if !reflect.DeepEqual(evs[i], ev) {
			t.Fatalf("the successor rewrote event %d: %+v, was %+v", ev.Seq, evs[i], ev)
		}
	}
	epoch2, _ := e.session(id)
	if epoch2.Record.Epoch != epoch1.Record.Epoch+1 || epoch2.Record.OwnerRunID == epoch1.Record.OwnerRunID || epoch2.Record.OwnerProcess != "p1" {
		t.Fatalf("record after restart: %+v (before %+v)", epoch2.Record, epoch1.Record)
	}

	// No committed step ran twice; only the interrupted one ran once per
	// owner (at-least-once for uncommitted work).
	for _, k := range e.StepKeys(evs) {
		n, want := e.log.Count(id, k), 1
		if k == interruptedKey {
			want = 2
		}
		if n != want {
			t.Fatalf("step %s ran %d times, want %d; log %+v", k, n, want, e.log.Entries())
		}
	}

	// The successor keeps answering on every address.
	e.Send("restart-alias", harness.Deliver("after restart"))
	e.CheckStream(e.WaitOutput(id, "after restart"))

	// The timer armed by the first owner still ends the session.
	_, snap := e.session(id)
	if snap.Timer == nil || snap.Timer.ID != epoch1.Record.OwnerRunID {
		t.Fatalf("timer after restart %+v, armed by run %s", snap.Timer, epoch1.Record.OwnerRunID)
	}
	e.Send(id, harness.Timeout(snap.Timer.ID))
	evs = e.WaitKind(id, wire.EventSessionEnded, 1)
	e.CheckStream(evs)
	if end := harness.FirstData[wire.SessionEnded](t, evs, wire.EventSessionEnded); end.Reason != wire.EndExpired {
		t.Fatalf("ended %+v", end)
	}
	e.waitEnded(id, "restart-alias")
}
