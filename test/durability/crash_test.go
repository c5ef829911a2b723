package durability_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/wire"
)

// An owner process SIGKILLed while a step runs: its peer takes the dead
// lease over and the session with it (epoch+1). Every command is applied
// exactly once in rule order, every output appears once, and only the step
// the kill interrupted (never committed) runs again.
func TestKillMidStep(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.owner("a")
	id := c.start(protocol.StartRequest{})
	c.send(id, harness.WithID("warm", harness.Deliver("warm up")))
	c.waitOutput(id, "warm up")
	c.owner("b")

	want, ids := []string{"warm up", "/sleep 2s"}, []string{"warm", "sleep"}
	c.send(id, harness.WithID("sleep", harness.Deliver("/sleep 2s")))
	for i := range 4 {
		text, cid := fmt.Sprintf("queued %d", i), fmt.Sprintf("q%d", i)
		c.send(id, harness.WithID(cid, harness.Deliver(text)))
		want, ids = append(want, text), append(ids, cid)
	}
	c.waitExec(id, "t2/1", "a") // the sleep step runs in a, not committed
	before := c.record(id)
	killed := c.kill(a)

	rec := c.waitOwner(id, "b")
	t.Logf("session taken over by b %v after the kill", time.Since(killed).Round(time.Millisecond))
	if rec.Epoch != before.Epoch+1 || rec.OwnerRunID == before.OwnerRunID {
		t.Fatalf("record after takeover %+v, before %+v", rec, before)
	}
	evs := c.waitFor(id, "every delivery answered", func(evs []wire.Event) bool {
		return len(harness.Outputs(evs)) >= len(want) && harness.Count(evs, wire.EventSessionWaiting) >= len(want)
	})
	if applied := checkStream(t, evs); !slices.Equal(applied, ids) {
		t.Fatalf("applied %v, want %v (FIFO order)", applied, ids)
	}
	if got := harness.Outputs(evs); !slices.Equal(got, want) {
		t.Fatalf("outputs %q, want %q", got, want)
	}
	// The sleep step ran in a and was cut short; b ran it again. Under an
	// extremely slow machine a may have committed it before the kill: then
	// it must not have run again.
	interrupted := stepCommittedBy(t, evs, "t2/1") == rec.OwnerRunID
	if !interrupted {
		t.Log("the sleep step committed before the kill")
		c.checkCommittedStepsRanOnce(id, evs)
	} else {
		c.checkCommittedStepsRanOnce(id, evs, "t2/1")
		if runs := c.runs(id)["t2/1"]; !slices.Equal(runs, []string{"a", "b"}) {
			t.Fatalf("t2/1 ran in %v, want a then b", runs)
		}
	}

	c.send(id, harness.WithID("after", harness.Deliver("after takeover")))
	checkStream(t, c.waitOutput(id, "after takeover"))
}

// An owner process SIGKILLed right after a commit CAS and before it
// published that commit's events: the successor publishes them from the
// record's outbox, stamped by the dead run, and never re-runs the step.
func TestKillBetweenCommitAndPublish(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	// Commit 1: session.started; 2: "hello" admitted; 3: step t1/1's result.
	a := c.owner("a", "--fault", "crash-after-commit:3")
	id := c.start(protocol.StartRequest{})
	c.waitKind(id, wire.EventSessionStarted, 1)
	first := c.record(id)
	c.owner("b")
	c.send(id, harness.WithID("hello", harness.Deliver("hello")))
	a.Wait(t, wait) // the fault killed it
	if !a.Contains("fault injected: killing this process") {
		t.Fatalf("a exited without the fault:\n%s", a.Output())
	}
	if evs := c.events(id); slices.Contains(harness.Outputs(evs), "hello") {
		t.Fatalf("the committed output was published before the crash: %s", harness.Kinds(evs))
	}
	if cur := c.record(id); cur.Writer != first.OwnerRunID || cur.WriteCounter < 3 {
		t.Fatalf("the third commit did not land before the crash: %+v", cur)
	}

	c.waitOwner(id, "b")
	evs := c.waitOutput(id, "hello")
	if applied := checkStream(t, evs); !slices.Equal(applied, []string{"hello"}) {
		t.Fatalf("applied %v", applied)
	}
	// The step's events come from the dead run's outbox, not from a re-run.
	if by := stepCommittedBy(t, evs, "t1/1"); by != first.OwnerRunID {
		t.Fatalf("turn.step t1/1 stamped by run %s, want the dead run %s", by, first.OwnerRunID)
	}
	c.checkCommittedStepsRanOnce(id, evs)
	if got := harness.Outputs(evs); !slices.Equal(got, []string{"hello"}) {
		t.Fatalf("outputs %q", got)
	}

	c.send(id, harness.WithID("after", harness.Deliver("after takeover")))
	evs = c.waitOutput(id, "after takeover")
	if applied := checkStream(t, evs); !slices.Equal(applied, []string{"hello", "after"}) {
		t.Fatalf("applied %v", applied)
	}
	c.checkCommittedStepsRanOnce(id, evs)
}

// stepCommittedBy returns the owner run that stamped turn.step key.
func stepCommittedBy(t *testing.T, evs []wire.Event, key string) string {
	t.Helper()
	for _, ev := range evs {
		if ev.Kind != wire.EventTurnStep {
			continue
		}
		var d wire.TurnStep
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%s/%d", d.TurnID, d.Step) == key {
			return ev.OwnerRunID
		}
	}
	t.Fatalf("no turn.step %s in %s", key, harness.Kinds(evs))
	return ""
}

// A process frozen past its lease (SIGSTOP) loses its session to a peer;
// resumed (SIGCONT), it finds its lease gone, fences itself and stops the
// session without a side effect: no commit, no step, no consumer (neither
// its old epoch's nor, by name, its successor's). Then it re-acquires its
// lease and serves again.
func TestFrozenOwnerIsFenced(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.owner("a")
	id := c.start(protocol.StartRequest{})
	c.send(id, harness.WithID("one", harness.Deliver("one")))
	c.waitOutput(id, "one")
	c.owner("b")
	c.send(id, harness.WithID("sleep", harness.Deliver("/sleep 1s")))
	c.waitExec(id, "t2/1", "a")
	before := c.record(id)
	if err := a.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			_ = a.Cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	rec := c.waitOwner(id, "b")
	c.send(id, harness.WithID("two", harness.Deliver("two")))
	c.waitOutput(id, "two")

	execsBefore := len(c.execs())
	seqAtCont := len(c.events(id))
	runsOfA := countProcess(c.runs(id), "a")
	if err := a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	// a notices it lost its lease, stops everything, and comes back with a
	// fresh lease (b released the key after adopting).
	c.waitLogCount(a, "owner serving", 2)
	c.send(id, harness.WithID("three", harness.Deliver("three")))
	c.waitOutput(id, "three")
	time.Sleep(500 * time.Millisecond) // room for a stray side effect to show

	if !a.Contains("fenced: stopping every session") {
		t.Fatalf("a did not fence itself:\n%s", harness.LastLines(a.Output(), 40))
	}
	if n := countProcess(c.runs(id), "a"); n != runsOfA {
		t.Fatalf("a ran %d more steps after SIGCONT", n-runsOfA)
	}
	if a.Contains("inbox consumer recreated") {
		t.Fatal("a recreated a consumer after it was fenced")
	}
	evs := c.events(id)
	if applied := checkStream(t, evs); !slices.Equal(applied, []string{"one", "sleep", "two", "three"}) {
		t.Fatalf("applied %v", applied)
	}
	if got := harness.Outputs(evs); !slices.Equal(got, []string{"one", "/sleep 1s", "two", "three"}) {
		t.Fatalf("outputs %q", got)
	}
	for _, ev := range evs[seqAtCont:] {
		if ev.OwnerRunID == before.OwnerRunID {
			t.Fatalf("event %d (%s) by the frozen run after SIGCONT", ev.Seq, ev.Kind)
		}
	}
	c.checkCommittedStepsRanOnce(id, evs, "t2/1")
	now := c.record(id)
	if now.OwnerRunID != rec.OwnerRunID || now.Writer != rec.OwnerRunID || now.Epoch != before.Epoch+1 {
		t.Fatalf("record %+v; taken over as %+v", now, rec)
	}
	// Only the successor's consumer exists: a never recreated its epoch's.
	names := c.consumers()
	if !slices.Contains(names, now.Consumer) || slices.Contains(names, before.Consumer) {
		t.Fatalf("consumers %v; want %s and not %s", names, now.Consumer, before.Consumer)
	}
	if len(c.execs()) < execsBefore {
		t.Fatal("exec log shrank")
	}
	// a serves new sessions again.
	other := c.start(protocol.StartRequest{})
	c.send(other, harness.WithID("hi", harness.Deliver("hi")))
	c.waitOutput(other, "hi")
}

func countProcess(runs map[string][]string, pid string) int {
	n := 0
	for _, ps := range runs {
		for _, p := range ps {
			if p == pid {
				n++
			}
		}
	}
	return n
}

// The adopter of a dead process's session is itself SIGKILLed at a fault
// point of its claim — (a) after writing its index entry, before the claim
// CAS; (b) after the claim CAS, before creating the consumer. A third
// process still takes the session over: (a) through the sweeper (the record
// still names the first dead process, whose lease is gone), (b) through the
// adopter's own lease and index. When the first process and the adopter
// come back under their IDs they find the session taken and leave it there.
func TestKillDuringAdoption(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, fault, owner string }{
		{"after index", "crash-after-index:1", "a"},
		{"after claim", "crash-after-claim:1", "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			a := c.owner("a")
			id := c.start(protocol.StartRequest{})
			c.send(id, harness.WithID("one", harness.Deliver("one")))
			c.waitOutput(id, "one")
			b := c.owner("b", "--fault", tc.fault)
			c.kill(a)
			b.Wait(t, wait) // b adopted the session and crashed at the fault
			if !b.Contains("fault injected: killing this process") {
				t.Fatalf("b exited without the fault:\n%s", harness.LastLines(b.Output(), 30))
			}
			if rec := c.record(id); rec.OwnerProcess != tc.owner {
				t.Fatalf("after the fault the record names %s, want %s", rec.OwnerProcess, tc.owner)
			}
			crashed := time.Now()
			c.owner("cc")
			c.send(id, harness.WithID("two", harness.Deliver("two")))
			c.waitOwner(id, "cc")
			evs := c.waitOutput(id, "two")
			t.Logf("taken over by cc %v after the adopter crashed", time.Since(crashed).Round(time.Millisecond))
			if applied := checkStream(t, evs); !slices.Equal(applied, []string{"one", "two"}) {
				t.Fatalf("applied %v", applied)
			}
			if got := harness.Outputs(evs); !slices.Equal(got, []string{"one", "two"}) {
				t.Fatalf("outputs %q", got)
			}
			c.checkCommittedStepsRanOnce(id, evs)
			// The first process and the adopter come back under their IDs:
			// each drops its stale index entry (if an adoption did not
			// already: a peer adopts a dead process's index only if it saw
			// its lease live before it expired, and cc may have started
			// after b's lease expired) and leaves the session where it
			// runs. Then every index names the session where it runs, and
			// only there.
			c.owner("a")
			c.owner("b")
			c.eventually("stale index entries removed", func() bool {
				for pid, want := range map[string]bool{"a": false, "b": false, "cc": true} {
					ids, err := c.Store.ListIndex(t.Context(), pid)
					if err != nil || slices.Contains(ids, id) != want {
						return false
					}
				}
				return true
			})
			if rec := c.record(id); rec.OwnerProcess != "cc" {
				t.Fatalf("the restarted process took the session: %+v", rec)
			}
		})
	}
}
