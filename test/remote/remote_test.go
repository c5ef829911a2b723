package remote_test

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/test/remote/worker"
	"github.com/baton-rt/baton/wire"
)

// The worker imports no Baton package: nats.go and encoding/json (and the
// standard library) are all a worker in another language has too.
func TestWorkerImportsNoBatonPackage(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/baton-rt/baton/test/remote/worker").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch {
		case dep == "github.com/baton-rt/baton/test/remote/worker":
		case strings.HasPrefix(dep, "github.com/baton-rt/"):
			t.Errorf("the worker depends on %s", dep)
		case strings.Contains(strings.SplitN(dep, "/", 2)[0], ".") &&
			!strings.HasPrefix(dep, "github.com/nats-io/") && !strings.HasPrefix(dep, "golang.org/x/") &&
			!strings.HasPrefix(dep, "github.com/klauspost/"):
			t.Errorf("the worker depends on %s, not nats.go or the standard library", dep)
		}
	}
	if !strings.Contains(string(out), "github.com/nats-io/nats.go\n") {
		t.Errorf("go list -deps does not list nats.go:\n%s", out)
	}
}

// One session end to end: a turn of two steps whose deltas reach SSE, a
// journaled call replayed (not re-run) after its owner died right after
// recording it, and a cancel that reaches the worker mid-step.
func TestRemoteSessionEndToEnd(t *testing.T) {
	e := newEnv(t)
	a := e.owner("a", "--fault", "crash-after-journal:1")
	e.worker("w1")
	id := e.create()

	sse := e.h.SSE(e.ing.URL() + "/v1/sessions/" + id + "/events")
	e.say(id, "two")
	frames, err := sse.Until(wait, "the two-step turn's output", func(f harness.Frame) bool {
		return f.Event == wire.EventMessageOutput && strings.Contains(f.Data, "two steps")
	})
	e.h.Check(err)
	var deltas []string
	for _, f := range frames {
		if f.Event == wire.EventMessageDelta {
			var ev struct{ Data wire.MessageDelta }
			e.h.Check(json.Unmarshal([]byte(f.Data), &ev))
			deltas = append(deltas, ev.Data.Text)
		}
	}
	if !slices.Equal(deltas, []string{"first ", "second"}) {
		t.Fatalf("deltas on SSE: %q, want the two steps' [first  second]", deltas)
	}
	evs := e.turns(id, 1)
	if steps := harness.Count(evs, wire.EventTurnStep); steps != 2 {
		t.Fatalf("%d turn.step events, want 2", steps)
	}

	// The owner dies right after the journal write; its peer re-runs the
	// step, whose call comes back from the journal.
	e.owner("b")
	e.say(id, "do")
	evs = e.turns(id, 2)
	if got := lastOutput(evs); got != "fetched 1" {
		t.Fatalf("output %q, want fetched 1 (the journaled result)", got)
	}
	if n := e.effects.Load(); n != 1 {
		t.Fatalf("the journaled call ran %d times, want once", n)
	}
	if strings.Count(strings.Join(harness.Outputs(evs), "\n"), "fetched 1") != 1 {
		t.Fatalf("the re-run step's output committed other than once: %q", harness.Outputs(evs))
	}
	a.Wait(t, wait)
	if !a.Contains("fault injected: killing this process") {
		t.Fatalf("owner a exited without the fault:\n%s", harness.LastLines(a.Output(), 30))
	}

	// A cancel mid-step reaches the worker.
	e.say(id, "wait")
	var token string
	select {
	case token = <-e.started:
	case <-time.After(wait):
		t.Fatal("the wait step never reached a worker")
	}
	if code, body := e.call("POST", "/v1/sessions/"+id+"/cancel", `{}`); code != 202 {
		t.Fatalf("cancel: %d %s", code, body)
	}
	e.h.Eventually(wait, "the worker saw the cancel", func() bool { return slices.Contains(e.cancelled(), token) })
	e.h.Eventually(wait, "turn.cancelled", func() bool { return harness.Count(e.events(id), wire.EventTurnCancelled) == 1 })
	e.say(id, "after")
	evs = e.turns(id, 3)
	if got := lastOutput(evs); got != "echo after" {
		t.Fatalf("output %q after the cancelled turn, want echo after", got)
	}
}

// Two workers share a deployment's steps; with none, a step waits out
// the unavailability window and fails with agent_unavailable; a worker
// started within the window answers the waiting step; started again, the
// next delivery is answered.
func TestWorkersShareAndUnavailable(t *testing.T) {
	e := newEnv(t)
	// The window is long enough for the test's own steps under load (a
	// worker started once the owner is seen asking again must subscribe
	// within it). One attempt: this test is about the failure itself;
	// retries are retry_test.go's.
	a := e.owner("a", "--agent-unavailable-after", "5s", "--step-retries", "0")
	w1, w2 := e.worker("w1"), e.worker("w2")
	ids := []string{e.create(), e.create(), e.create(), e.create()}
	for round := 1; e.servedBy("w1") == 0 || e.servedBy("w2") == 0; round++ {
		if round > 10 {
			t.Fatalf("after %d rounds one worker served nothing: w1 %d, w2 %d", round-1, e.servedBy("w1"), e.servedBy("w2"))
		}
		for _, id := range ids {
			e.say(id, "hello")
		}
		for _, id := range ids {
			e.turns(id, round)
		}
	}
	w1.Stop()
	w2.Stop()

	id := ids[0]
	before, n := len(e.events(id)), e.completed(id)
	sent := time.Now()
	e.say(id, "nobody")
	evs := e.turns(id, n+1)
	errs := errorsOf(t, evs[before:])
	if len(errs) != 1 || errs[0].Code != wire.CodeAgentUnavailable {
		t.Fatalf("errors %+v, want one agent_unavailable", errs)
	}
	if waited := time.Since(sent); waited < 5*time.Second {
		t.Fatalf("agent_unavailable after %v, before the 5s window", waited)
	}

	// A rolling restart: the step waits for a worker within the window.
	asked := harness.LogCount(a, noWorker)
	e.say(id, "rolling")
	e.h.Eventually(wait, "the owner asking again", func() bool { return harness.LogCount(a, noWorker) >= asked+2 })
	e.worker("w3")
	evs = e.turns(id, n+2)
	if got := lastOutput(evs); got != "echo rolling" {
		t.Fatalf("output %q after a worker came back within the window, want echo rolling", got)
	}
	if errs := errorsOf(t, evs[before:]); len(errs) != 1 {
		t.Fatalf("errors %+v: the waiting step failed", errs)
	}
	e.say(id, "back")
	evs = e.turns(id, n+3)
	if got := lastOutput(evs); got != "echo back" {
		t.Fatalf("output %q after a worker came back, want echo back", got)
	}
}

// noWorker is the owner's debug line for a step request nobody subscribes to.
const noWorker = "no worker subscribes to the step request; asking again"

// completed counts the session's completed turns.
func (e *env) completed(id string) int { return harness.Count(e.events(id), wire.EventTurnCompleted) }

// A step whose history is over the inline bound is served through the
// paging subject, in more than one page.
func TestHistoryPaged(t *testing.T) {
	e := newEnv(t)
	e.owner("a", "--agent-inline-bytes", "256")
	e.worker("w1")
	id := e.create()
	for i := range 4 {
		e.say(id, strings.Repeat("x", 200))
		e.turns(id, i+1)
	}
	e.say(id, "history")
	evs := e.turns(id, 5)
	// 5 user entries (the deliveries, this one included): the echoes are
	// outputs, not history entries.
	if got := lastOutput(evs); got != "history 5 entries in 1 pages" {
		t.Fatalf("output %q, want the 5 entries paged", got)
	}
}

// A worker that speaks an older protocol version is refused, never misread:
// its reply fails the step with result_invalid.
func TestOlderProtocolRefused(t *testing.T) {
	e := newEnv(t)
	e.owner("a")
	e.worker("old", func(w *worker.Worker) {
		older := worker.Version - 1
		w.ReplyVersion = &older
	})
	id := e.create()
	e.say(id, "hello")
	evs := e.turns(id, 1)
	errs := errorsOf(t, evs)
	if len(errs) != 1 || errs[0].Code != wire.CodeResultInvalid || !strings.Contains(errs[0].Message, "protocol version 0") {
		t.Fatalf("errors %+v, want one result_invalid naming protocol version 0; events %v", errs, harness.Kinds(evs))
	}
	if outs := harness.Outputs(evs); len(outs) != 0 {
		t.Fatalf("outputs %q from a refused reply", outs)
	}
}

// A worker that took a step and died is found out by its missing
// heartbeats: the step fails with agent_timeout, and the next delivery
// goes to a live worker.
func TestWorkerDiesMidStep(t *testing.T) {
	e := newEnv(t)
	// A timeout no live worker's reply takes under load, short enough to
	// keep the test quick. One attempt: this test is about the failure
	// itself; retries are retry_test.go's.
	e.owner("a", "--agent-heartbeat-interval", "500ms", "--agent-heartbeat-timeout", "3s", "--step-retries", "0")
	e.worker("doomed")
	id := e.create()
	t0 := time.Now()
	e.say(id, "die")
	evs := e.turns(id, 1)
	t.Logf("agent_timeout after %v", time.Since(t0))
	errs := errorsOf(t, evs)
	if len(errs) != 1 || errs[0].Code != wire.CodeAgentTimeout {
		t.Fatalf("errors %+v, want one agent_timeout", errs)
	}
	e.worker("alive")
	e.say(id, "again")
	if got := lastOutput(e.turns(id, 2)); got != "echo again" {
		t.Fatalf("output %q, want echo again", got)
	}
}
