package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/baton-rt/baton/internal/failpoint"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// The target cannot read the checkpoint (its validation refuses): nothing is
// written, the source keeps the session and processes the trigger once.
func TestHandoffUnreadableCheckpointRecoversSource(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	var refused atomic.Int32
	e.owner("v2", "p2", func(c *Config) {
		c.Failpoints = failpoint.New().On(failpoint.RefuseActivation, failpoint.If(func() bool { refused.Add(1); return true }))
	})
	id := e.Start("v1").SessionID
	e.Send(id, stamped("u1", "v1", "before"))
	e.WaitOutput(id, "before")
	before, _ := e.session(id)
	nExec := len(e.execs(id))

	e.Send(id, stamped("u2", "v2", "unreadable"))
	e.WaitOutput(id, "unreadable")
	e.WaitKind(id, wire.EventTurnCompleted, 2)
	if refused.Load() == 0 {
		t.Fatal("the target was never asked to activate")
	}
	after, _ := e.session(id)
	if after.Record.DeploymentID != "v1" || after.Record.Epoch != before.Record.Epoch ||
		after.Record.OwnerRunID != before.Record.OwnerRunID || after.Record.State != "active" {
		t.Fatalf("record after refused handoff: deployment %s epoch %d run %s state %s (before epoch %d run %s)",
			after.Record.DeploymentID, after.Record.Epoch, after.Record.OwnerRunID, after.Record.State,
			before.Record.Epoch, before.Record.OwnerRunID)
	}
	evs := e.Events(id)
	applied := harness.ByID(e.CheckStream(evs))
	if _, ok := applied["u2"]; !ok {
		t.Fatal("trigger not applied")
	}
	n := 0
	for _, a := range e.Applied(evs) {
		if a.CommandID == "u2" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("trigger applied %d times", n)
	}
	ex := e.execs(id)[nExec:]
	if len(ex) == 0 {
		t.Fatal("no step ran for the trigger")
	}
	for _, p := range ex {
		if p != "p1" {
			t.Fatalf("steps after the refused handoff ran on %v, want p1 only", ex)
		}
	}
	// The session still works on v1.
	e.Send(id, stamped("u3", "v1", "after"))
	e.CheckStream(e.WaitOutput(id, "after"))
}

// A session in a state that is not idle skips the handoff with the reason R10
// names and stays; settling afterwards does not move it (no remembered
// target); only a fresh eligible delivery does.
func TestHandoffSkipsUnsafeStates(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		reason string
		// setup brings the session into the state and returns the trigger's ID.
		setup func(e *env, id string)
		// settle ends the state after the trigger; settleFirst: the trigger
		// is applied (and its skip recorded) only once the state settles.
		settle      func(e *env, id string)
		settleFirst bool
	}{
		{
			name: "input", reason: "input", settleFirst: true,
			setup: func(e *env, id string) {
				e.Send(id, stamped("x0", "v1", "/ask q"))
				e.WaitKind(id, wire.EventInputRequested, 1)
			},
			settle: func(e *env, id string) {
				req := harness.FirstData[wire.InputRequested](e.t, e.Events(id), wire.EventInputRequested)
				e.Send(id, harness.WithID("ans", harness.InputResponse(req.RequestID, `"a"`)))
				e.WaitApplied(id, "ans")
			},
		},
		{
			name: "task", reason: "task",
			setup: func(e *env, id string) {
				e.Send(id, stamped("x0", "v1", "/task 1h"))
				e.WaitKind(id, wire.EventTaskStarted, 1)
			},
			settle: func(e *env, id string) {
				ts := harness.FirstData[wire.TaskStarted](e.t, e.Events(id), wire.EventTaskStarted)
				e.Send(id, harness.WithID("res", harness.TaskResult(ts.TaskID, `{"ok":true}`)))
				e.WaitKind(id, wire.EventTaskCompleted, 1)
			},
		},
		{
			name: "running step", reason: "busy",
			setup: func(e *env, id string) {
				e.Send(id, stamped("x0", "v1", "/sleep 2s"))
				e.WaitFor(id, "the sleep step running", func([]wire.Event) bool { return len(e.execs(id)) > 0 })
			},
		},
		{
			name: "queued", reason: "queued",
			setup: func(e *env, id string) {
				e.Send(id, stamped("x0", "v1", "/sleep 2s"))
				e.WaitFor(id, "the sleep step running", func([]wire.Event) bool { return len(e.execs(id)) > 0 })
				e.Send(id, stamped("x1", "v1", "queued v1"))
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.owner("v1", "p1")
			e.owner("v2", "p2")
			id := e.Start("v1").SessionID
			before, _ := e.session(id)
			tc.setup(e, id)

			e.Send(id, stamped("trig", "v2", "trigger v2"))
			if tc.settleFirst {
				time.Sleep(200 * time.Millisecond) // the trigger is received before the answer
				tc.settle(e, id)
			}
			evs := e.WaitKind(id, wire.EventHandoffSkipped, 1)
			sk := harness.FirstData[wire.HandoffSkipped](t, evs, wire.EventHandoffSkipped)
			if sk.Reason != tc.reason || sk.CommandID != "trig" || sk.TargetDeploymentID != "v2" || sk.DeploymentID != "v1" {
				t.Fatalf("handoff.skipped %+v, want reason %s", sk, tc.reason)
			}
			if i, j := slices.IndexFunc(evs, harness.IsKind(wire.EventHandoffSkipped)), slices.IndexFunc(evs, harness.IsApplied("trig")); j >= 0 && i > j {
				t.Fatalf("handoff.skipped after command.applied: %v", harness.Kinds(evs))
			}
			if tc.settle != nil && !tc.settleFirst {
				tc.settle(e, id)
			}
			e.WaitOutput(id, "trigger v2")
			// Let whatever the settling triggers run: nothing may move it.
			e.WaitFor(id, "the session to settle", func(evs []wire.Event) bool {
				return harness.Count(evs, wire.EventTurnStarted) > 0 &&
					harness.Count(evs, wire.EventTurnStarted) == harness.Count(evs, wire.EventTurnCompleted)+harness.Count(evs, wire.EventTurnCancelled)
			})
			time.Sleep(300 * time.Millisecond)
			cur, _ := e.session(id)
			if cur.Record.DeploymentID != "v1" || cur.Record.Epoch != before.Record.Epoch {
				t.Fatalf("after settling: deployment %s epoch %d (before %d)", cur.Record.DeploymentID, cur.Record.Epoch, before.Record.Epoch)
			}
			for _, p := range e.execs(id) {
				if p != "p1" {
					t.Fatalf("a step ran on %s before an eligible delivery", p)
				}
			}
			evs = e.Events(id)
			if n := harness.Count(evs, wire.EventHandoffSkipped); n != 1 {
				t.Fatalf("%d handoff.skipped, want 1", n)
			}
			if n := harness.Count(evs, wire.EventHandoffStarted); n != 0 {
				t.Fatalf("%d handoff.started before an eligible delivery", n)
			}

			e.Send(id, stamped("fresh", "v2", "fresh v2"))
			e.WaitOutput(id, "fresh v2")
			if epoch := e.waitOwner(id, "v2"); epoch != before.Record.Epoch+1 {
				t.Fatalf("epoch %d after the eligible delivery, want %d", epoch, before.Record.Epoch+1)
			}
			applied := harness.ByID(e.CheckStream(e.Events(id)))
			for _, c := range []string{"x0", "trig", "fresh"} {
				if _, ok := applied[c]; !ok {
					t.Fatalf("%s not applied", c)
				}
			}
		})
	}
}

// sessionWrite is one write of a session record seen by a KV watcher.
type sessionWrite struct {
	epoch    uint64
	run, dep string
	revision uint64
	deleted  bool
}

// Many sessions with deliveries from v1 and v2 interleaved at random: per
// session one owner run per epoch, epochs only grow, every delivery applied
// once, no committed step executed twice.
func TestHandoffConcurrentSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Each owner's own log, for the stops that allow a step to run again.
	logs := map[string]*harness.LogCapture{"p1": {}, "p2": {}}
	teed := func(pid string) func(*Config) {
		return func(c *Config) { c.Log = logs[pid].Tee(c.Log, slog.LevelDebug) }
	}
	owners := []*owner{e.owner("v1", "p1", teed("p1")), e.owner("v2", "p2", teed("p2"))}

	bucket, err := e.JS.KeyValue(t.Context(), e.Names.SessionsBucket())
	if err != nil {
		t.Fatal(err)
	}
	wctx, stopWatch := context.WithCancel(t.Context())
	defer stopWatch()
	w, err := bucket.WatchAll(wctx, jetstream.IncludeHistory())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	writes := map[string][]sessionWrite{}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for u := range w.Updates() {
			if u == nil {
				continue
			}
			sw, ok := toSessionWrite(u)
			if !ok {
				continue
			}
			mu.Lock()
			writes[u.Key()] = append(writes[u.Key()], sw)
			mu.Unlock()
		}
	}()

	n := testsize.Pick(50, 500)
	const per = 4
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.Start("v1").SessionID
	}
	type send struct {
		session int
		id, dep string
	}
	var plan []send
	for i := range ids {
		for k := range per {
			dep := "v1"
			if rand.IntN(2) == 0 {
				dep = "v2"
			}
			plan = append(plan, send{i, fmt.Sprintf("s%d-%d", i, k), dep})
		}
	}
	// Random interleaving across sessions, each session's own order kept.
	rand.Shuffle(len(plan), func(a, b int) { plan[a], plan[b] = plan[b], plan[a] })
	next := make([]int, n)
	for j := range plan {
		i := plan[j].session
		plan[j].id = fmt.Sprintf("s%d-%d", i, next[i])
		next[i]++
	}
	for _, s := range plan {
		e.Send(ids[s.session], stamped(s.id, s.dep, "text "+s.id))
	}
	evsOf := make([][]wire.Event, n)
	for i, id := range ids {
		evsOf[i] = e.WaitApplied(id, fmt.Sprintf("s%d-%d", i, per-1))
	}
	// Quiesce: the last deliveries' turns finish, then stop watching.
	for i, id := range ids {
		evsOf[i] = e.WaitFor(id, "turns complete", func(evs []wire.Event) bool {
			return harness.Count(evs, wire.EventTurnStarted) == harness.Count(evs, wire.EventTurnCompleted)+harness.Count(evs, wire.EventTurnCancelled)
		})
	}
	time.Sleep(200 * time.Millisecond)
	stopWatch()
	<-watched

	execs := e.log.Entries()
	var stops []harness.Stop
	for pid, l := range logs {
		stops = append(stops, harness.LogStops(pid, l.String())...)
	}
	reran := 0
	mu.Lock()
	defer mu.Unlock()
	moved := 0
	for i, id := range ids {
		ws := writes[id]
		if len(ws) == 0 {
			t.Fatalf("session %s: no record write watched", id)
		}
		runAt := map[uint64]string{}
		var last uint64
		for k, sw := range ws {
			if sw.deleted {
				t.Fatalf("session %s: record deleted at revision %d", id, sw.revision)
			}
			if sw.epoch < last {
				t.Fatalf("session %s: write %d at epoch %d after epoch %d", id, k, sw.epoch, last)
			}
			if r, ok := runAt[sw.epoch]; ok && r != sw.run {
				t.Fatalf("session %s: epoch %d written by runs %s and %s", id, sw.epoch, r, sw.run)
			}
			if sw.epoch > last && k > 0 && runAt[last] == sw.run {
				t.Fatalf("session %s: run %s at epochs %d and %d", id, sw.run, last, sw.epoch)
			}
			runAt[sw.epoch], last = sw.run, sw.epoch
		}
		if len(runAt) > 1 {
			moved++
		}
		applied := harness.ByID(e.CheckStream(evsOf[i]))
		for k := range per {
			if _, ok := applied[fmt.Sprintf("s%d-%d", i, k)]; !ok {
				t.Fatalf("session %s: s%d-%d not applied", id, i, k)
			}
		}
		// Every committed step ran exactly once, unless its first run was
		// stopped before its commit landed, as that run's own process
		// logged between the two runs (a fence: a lease renewal late on a
		// loaded machine).
		again, err := harness.CheckStepRuns(execs, id, evsOf[i], stops)
		if err != nil {
			t.Fatalf("session %s: %v (%d fences)", id, err, fences(owners))
		}
		reran += len(again)
	}
	t.Logf("%d sessions, %d deliveries each, %d changed owner run, %d fences, %d steps ran again after a stop", n, per, moved, fences(owners), reran)
}

// fences counts the self-fencings of owners.
func fences(owners []*owner) uint64 {
	var n uint64
	for _, o := range owners {
		n += o.Stats().Fences
	}
	return n
}

// A candidate whose activation completes while its process is stopping
// (shutdown or fence) does not run the session then: spawn refuses once the
// lease period is over (before, its WaitGroup.Add raced with stopAll's Wait
// — found by the fault matrix; -race reports it). The restarted process
// resumes the session from its index and applies the trigger once.
func TestHandoffActivatedWhileStoppingIsResumed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	held, hold := make(chan struct{}), make(chan struct{})
	var once sync.Once
	faults := failpoint.New().On(failpoint.HandoffCandidateAfter, failpoint.Do(func(a failpoint.Args) {
		if handoff.Step(a.Detail) == handoff.StepUnmark {
			once.Do(func() { close(held); <-hold })
		}
	}))
	p2 := e.owner("v2", "p2", func(c *Config) { c.Failpoints = faults })
	other := e.Start("v2").SessionID // p2 is busy stopping it while the activation completes
	id := e.Start("v1").SessionID
	e.Send(id, stamped("t1", "v2", "moved"))
	select {
	case <-held:
	case <-time.After(wait):
		t.Fatal("the activation never reached unmark")
	}
	go p2.Cancel()
	e.Eventually(wait, "p2 to stop its other session", func() bool { return !slices.Contains(p2.Loaded(), other) })
	time.Sleep(100 * time.Millisecond)
	close(hold)
	<-p2.Done()
	if slices.Contains(p2.Loaded(), id) {
		t.Fatal("the stopped process runs the handed-off session")
	}
	e.owner("v2", "p2")
	evs := e.WaitOutput(id, "moved")
	applied := harness.ByID(e.CheckStream(evs))
	if _, ok := applied["t1"]; !ok {
		t.Fatal("trigger not applied")
	}
	if cur, _ := e.session(id); cur.Record.DeploymentID != "v2" || cur.Record.OwnerProcess != "p2" {
		t.Fatalf("record %+v", cur.Record)
	}
	for _, p := range e.execs(id) {
		if p != "p1" && p != "p2" {
			t.Fatalf("a step ran on %s", p)
		}
	}
}

// A successor that dies after its activation and before its first commit
// (here its run fails right after creating its consumer) leaves the pair
// handoff.started/completed to the owner that recovers it: the record's
// outcome names the handoff, its source and trigger until a commit confirms
// it, so the pair is recorded exactly once, and the trigger applied once.
func TestHandoffEventsSurviveSuccessorDeath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	var failed atomic.Bool
	e.owner("v2", "p2", func(c *Config) {
		c.Failpoints = failpoint.New().On(failpoint.AfterConsumer, func(a failpoint.Args) error {
			if runtime.BootReason(a.Detail) == runtime.BootHandoff && failed.CompareAndSwap(false, true) {
				return errors.New("fault: the successor dies before its first commit")
			}
			return nil
		})
	})
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("hello"))
	e.WaitOutput(id, "hello")
	e.Send(id, stamped("trigger", "v2", "on v2"))
	evs := e.WaitOutput(id, "on v2")
	if !failed.Load() {
		t.Fatal("the fault never fired")
	}
	if n, m := harness.Count(evs, wire.EventHandoffStarted), harness.Count(evs, wire.EventHandoffCompleted); n != 1 || m != 1 {
		t.Fatalf("handoff.started × %d, handoff.completed × %d: %v", n, m, harness.Kinds(evs))
	}
	if i, j := slices.IndexFunc(evs, harness.IsKind(wire.EventHandoffCompleted)), slices.IndexFunc(evs, harness.IsApplied("trigger")); i < 0 || j < i {
		t.Fatalf("handoff.completed at %d, the trigger applied at %d: %v", i, j, harness.Kinds(evs))
	}
	e.CheckStream(evs)
	if got := countApplied(evs)["trigger"]; got != 1 {
		t.Fatalf("trigger applied %d times", got)
	}
	cur, _ := e.session(id)
	if h := cur.Record.Handoff; h == nil || h.Step != "confirmed" {
		t.Fatalf("record's handoff outcome after the recovery's commit: %+v", h)
	}
}

// toSessionWrite decodes one update of a session-record watch; false for an
// undecodable value.
func toSessionWrite(u jetstream.KeyValueEntry) (sessionWrite, bool) {
	sw := sessionWrite{revision: u.Revision(), deleted: u.Operation() != jetstream.KeyValuePut}
	if !sw.deleted {
		var rec record.SessionRecord
		if err := json.Unmarshal(u.Value(), &rec); err != nil {
			return sw, false
		}
		sw.epoch, sw.run, sw.dep = rec.Epoch, rec.OwnerRunID, rec.DeploymentID
	}
	return sw, true
}
