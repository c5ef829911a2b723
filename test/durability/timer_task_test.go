package durability_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/wire"
)

// A session timer armed before its owner process was SIGKILLed fires after
// the takeover and ends the session once, through the successor; a timeout
// carrying another timer's ID (a stale wake) is applied and ignored.
func TestTimerArmedBeforeCrashFires(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.owner("a")
	started := time.Now()
	id := c.start(protocol.StartRequest{Timeout: "9s"})
	c.send(id, harness.WithID("hi", harness.Deliver("hi")))
	c.waitOutput(id, "hi")
	armed := c.record(id)
	c.owner("b")
	c.kill(a)
	rec := c.waitOwner(id, "b")
	if time.Since(started) > 8*time.Second {
		t.Logf("takeover took until %v after the start; the timer may fire before it", time.Since(started))
	}
	stale := wire.Command{Kind: wire.KindTimeout, Timeout: &wire.Timeout{TimerID: "a-stale-timer", Deadline: time.Now().UTC()}}
	c.send(id, harness.WithID("stale", stale))
	c.send(id, harness.WithID("alive", harness.Deliver("still alive")))
	c.waitOutput(id, "still alive")

	evs := c.waitKind(id, wire.EventSessionEnded, 1)
	if time.Since(started) < 9*time.Second {
		t.Fatalf("session ended %v after the start, before its 9s timer", time.Since(started))
	}
	applied := checkStream(t, evs)
	if !slices.Contains(applied, "stale") || !slices.Contains(applied, "alive") {
		t.Fatalf("applied %v", applied)
	}
	if got := harness.Outputs(evs); !slices.Equal(got, []string{"hi", "still alive"}) {
		t.Fatalf("outputs %q", got)
	}
	end := evs[len(evs)-1]
	var d wire.SessionEnded
	_ = json.Unmarshal(end.Data, &d)
	if end.Kind != wire.EventSessionEnded || d.Reason != wire.EndExpired || end.OwnerRunID != rec.OwnerRunID {
		t.Fatalf("last event %s %+v by run %s; want session.ended expired by %s", end.Kind, d, end.OwnerRunID, rec.OwnerRunID)
	}
	// The timeout that ended it carries the timer ID armed by the dead run.
	timeoutID := "timeout-" + armed.OwnerRunID
	if !slices.Contains(applied, timeoutID) {
		t.Fatalf("applied %v, want %s", applied, timeoutID)
	}
	c.checkCommittedStepsRanOnce(id, evs)
}

// A background task whose owner process was SIGKILLed while running it runs
// again on the surviving process (after the task ack wait, 2 s here; the
// task takes 8 s, so the killed process cannot have finished it) and
// its result reaches the session exactly once.
func TestTaskOfKilledOwnerCompletes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.owner("a")
	id := c.start(protocol.StartRequest{})
	c.send(id, harness.WithID("task", harness.Deliver("/task 8s"))) // longer than starting b takes on a loaded machine
	c.waitKind(id, wire.EventTaskStarted, 1)
	c.waitLogCount(a, "task running", 1) // a runs it (it is alone)
	b := c.owner("b")
	c.kill(a)

	c.waitKind(id, wire.EventTaskCompleted, 1)
	c.send(id, harness.WithID("after", harness.Deliver("after the task")))
	c.waitOutput(id, "after the task")
	time.Sleep(time.Second) // room for a duplicate result to show
	evs := c.events(id)
	applied := checkStream(t, evs)
	if n := harness.Count(evs, wire.EventTaskCompleted); n != 1 {
		t.Fatalf("%d task.completed events", n)
	}
	// The result arrives as one task.result command (ID derived from the
	// task ID, so a re-run reports under the same ID), applied once.
	var done wire.TaskCompleted
	for _, ev := range evs {
		if ev.Kind == wire.EventTaskCompleted {
			_ = json.Unmarshal(ev.Data, &done)
		}
	}
	results := 0
	for _, cid := range applied {
		if strings.HasPrefix(cid, "task-") && strings.HasSuffix(cid, "-"+done.TaskID) {
			results++
		}
	}
	if results != 1 || done.Error != "" {
		t.Fatalf("task %+v: %d results applied (%v)", done, results, applied)
	}
	if !slices.Contains(applied, "task") || !slices.Contains(applied, "after") {
		t.Fatalf("applied %v", applied)
	}
	if harness.LogCount(b, "task running") < 1 {
		t.Fatalf("b never ran the task:\n%s", harness.LastLines(b.Output(), 30))
	}
	c.checkCommittedStepsRanOnce(id, evs)
}
