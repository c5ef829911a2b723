package remote_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
)

// workerProcPkg is the worker as a process of its own (test/remote/workerproc).
const workerProcPkg = "github.com/baton-rt/baton/test/remote/workerproc"

// A worker process SIGKILLed mid-step, after its journaled call was
// recorded: the owner hears nothing for its heartbeat timeout, records
// turn.step_retried and sends the step again with a new token; the other
// worker takes it, gets the call's result from the journal (the call is
// not made again) and completes the turn.
func TestWorkerKilledMidStepRetried(t *testing.T) {
	e := newEnv(t)
	e.owner("a", "--agent-heartbeat-interval", "500ms", "--agent-heartbeat-timeout", "3s", "--step-retry-backoff", "200ms")
	calls := filepath.Join(t.TempDir(), "calls")
	a := e.workerProc("A", calls, "--hang-after-call")
	id := e.create()
	e.say(id, "retry")

	e.h.Eventually(wait, "worker A's journaled call", func() bool { return len(callLines(t, calls)) == 1 })
	tokenA := logString(t, a.WaitLog(e.h, "step taken", wait), "token")
	a.WaitLog(e.h, "journaled call returned", wait) // the call's record is durable
	heartbeats := e.countHeartbeats(tokenA)
	b := e.workerProc("B", calls)

	// A hangs in the step past the owner's heartbeat timeout, alive: its
	// heartbeats keep the step, so the timeout below is the kill's.
	e.h.Eventually(wait, "A's heartbeats", func() bool { return heartbeats.Load() >= 3 })
	time.Sleep(3500 * time.Millisecond)
	if evs := e.events(id); harness.Count(evs, wire.EventTurnStepRetried) != 0 || harness.Count(evs, wire.EventTurnCompleted) != 0 {
		t.Fatalf("the step ended while worker A was alive and heartbeating: %v", harness.Kinds(evs))
	}
	if a.Contains("step ended while hanging") {
		t.Fatalf("worker A's step was cancelled while it heartbeat:\n%s", a.Output())
	}

	killed := e.h.Kill(a, wait)
	if ws, ok := a.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("worker A ended with %v, not by SIGKILL", a.Cmd.ProcessState)
	}
	evs := e.turns(id, 1)
	logEvents(t, evs)

	// Each check below stands alone: all that fail are reported.
	retries := harness.AllData[wire.TurnStepRetried](t, evs, wire.EventTurnStepRetried)
	turn := harness.LastData[wire.TurnStarted](t, evs, wire.EventTurnStarted).TurnID
	if want := (wire.TurnStepRetried{TurnID: turn, Step: 1, Attempt: 2, Code: wire.CodeAgentTimeout}); len(retries) != 1 || retries[0] != want {
		t.Errorf("turn.step_retried %+v, want one %+v", retries, want)
	} else if retried, _ := harness.Find(evs, harness.IsKind(wire.EventTurnStepRetried)); !retried.Time.After(killed) {
		t.Errorf("turn.step_retried at %v, before worker A was killed at %v", retried.Time, killed)
	} else {
		t.Logf("turn.step_retried %v after the SIGKILL", retried.Time.Sub(killed).Round(time.Millisecond))
	}
	if errs := errorsOf(t, evs); len(errs) != 0 {
		t.Errorf("errors %+v, want none: the retry completed the step", errs)
	}
	if done := harness.LastData[wire.TurnCompletedV3](t, evs, wire.EventTurnCompleted); done.StopReason != wire.StopDone {
		t.Errorf("turn.completed %+v, want stopReason done", done)
	}
	if kinds := harness.Kinds(evs); !inOrder(kinds, wire.EventTurnStepRetried, wire.EventMessageOutput, wire.EventTurnCompleted) {
		t.Errorf("events %v, want turn.step_retried, then message.output, then turn.completed", kinds)
	}
	if got := lastOutput(evs); got != "fetched 1" {
		t.Errorf("output %q, want fetched 1 (the call's recorded result)", got)
	}
	if lines := callLines(t, calls); len(lines) != 1 || !strings.HasPrefix(lines[0], "A ") {
		t.Errorf("calls %q, want worker A's one call: the retry made the recorded call again", lines)
	}

	// B served the retried step, with a token of its own.
	if n, m := harness.LogCount(b, "step taken"), harness.LogCount(b, "step served"); n != 1 || m != 1 {
		t.Errorf("worker B took %d and served %d steps, want the retried one:\n%s", n, m, b.Output())
	} else {
		served := b.WaitLog(e.h, "step served", wait)
		if tokenB := logString(t, served, "token"); tokenB == "" || tokenB == tokenA {
			t.Errorf("worker B served token %q, worker A had %q: want a new token", tokenB, tokenA)
		}
		if logString(t, served, "text") != "retry" || logString(t, served, "session") != id {
			t.Errorf("worker B served %v, want session %s's retry step", served, id)
		}
	}
	if harness.LogCount(a, "step served") != 0 {
		t.Errorf("worker A served a step:\n%s", a.Output())
	}
}

// No worker at all: each attempt asks for --agent-unavailable-after and
// fails with agent_unavailable; the step runs 1+2 times, then the turn
// fails as a single attempt would.
func TestNoWorkerRetriedThenUnavailable(t *testing.T) {
	e := newEnv(t)
	o := e.owner("a", "--agent-unavailable-after", "500ms", "--step-retries", "2", "--step-retry-backoff", "100ms,200ms")
	id := e.create()
	e.say(id, "nobody")
	evs := e.turns(id, 1)
	logEvents(t, evs)

	// By the owner's clock: each attempt asked for its 500ms window, the
	// retries after their backoffs (each turn.step_retried is committed
	// before its attempt starts).
	times := eventTimes(evs, wire.EventTurnStarted, wire.EventTurnStepRetried, wire.EventErrorKind)
	if len(times) == 4 {
		for i, least := range []time.Duration{500 * time.Millisecond, 600 * time.Millisecond, 700 * time.Millisecond} {
			if took := times[i+1].Sub(times[i]); took < least {
				t.Errorf("attempt %d ended %v after it was due, before its window and backoff (%v)", i+1, took, least)
			} else {
				t.Logf("attempt %d ended %v after it was due", i+1, took.Round(time.Millisecond))
			}
		}
	}

	turn := harness.LastData[wire.TurnStarted](t, evs, wire.EventTurnStarted).TurnID
	retries := harness.AllData[wire.TurnStepRetried](t, evs, wire.EventTurnStepRetried)
	want := []wire.TurnStepRetried{
		{TurnID: turn, Step: 1, Attempt: 2, Code: wire.CodeAgentUnavailable},
		{TurnID: turn, Step: 1, Attempt: 3, Code: wire.CodeAgentUnavailable},
	}
	if len(retries) != len(want) || retries[0] != want[0] || retries[1] != want[1] {
		t.Errorf("turn.step_retried %+v, want %+v", retries, want)
	}
	errs := errorsOf(t, evs)
	if len(errs) != 1 || errs[0].Code != wire.CodeAgentUnavailable || errs[0].Step != 1 || errs[0].TurnID != turn {
		t.Errorf("errors %+v, want one agent_unavailable of step 1 of %s", errs, turn)
	}
	if done := harness.LastData[wire.TurnCompletedV3](t, evs, wire.EventTurnCompleted); done.StopReason != wire.StopError {
		t.Errorf("turn.completed %+v, want stopReason error", done)
	}
	kinds := harness.Kinds(evs)
	if !inOrder(kinds, wire.EventTurnStepRetried, wire.EventTurnStepRetried, wire.EventErrorKind, wire.EventTurnCompleted) {
		t.Errorf("events %v, want turn.step_retried twice, then error, then turn.completed", kinds)
	}
	// Three attempts, each over after its window: the owner asked 3 times
	// (each logged before its failure was committed; the owner's stderr
	// is read a moment later).
	for end := time.Now().Add(5 * time.Second); harness.LogCount(o, noneAnswered) < 3 && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	if n := harness.LogCount(o, noneAnswered); n != 3 {
		t.Errorf("the owner logged %q %d times, want 3 (one per attempt)", noneAnswered, n)
	}
}

// noneAnswered is the owner's warning for an attempt no worker answered
// within --agent-unavailable-after.
const noneAnswered = "no worker answered the step; it fails"

// workerProc starts test/remote/workerproc as a worker of v1 named name
// (its journaled calls appended to calls) and waits until it subscribed.
func (e *env) workerProc(name, calls string, args ...string) *proctest.Proc {
	e.t.Helper()
	bin := proctest.Build(e.t, workerProcPkg)
	p := e.procs.Start(e.h, "worker "+name, bin,
		append([]string{"--nats", e.URL, "--deployment", "v1", "--name", name, "--calls", calls}, args...)...)
	p.WaitLog(e.h, "ready", wait)
	return p
}

// countHeartbeats counts the heartbeats of the step token, from now on.
func (e *env) countHeartbeats(token string) *atomic.Int64 {
	e.t.Helper()
	nc, err := nats.Connect(e.URL)
	e.h.Check(err)
	e.t.Cleanup(nc.Close)
	var n atomic.Int64
	_, err = nc.Subscribe("baton.agent.v1.heartbeat."+token, func(*nats.Msg) { n.Add(1) })
	e.h.Check(err)
	e.h.Check(nc.Flush())
	return &n
}

// callLines is the lines of the calls file (none before the first call).
func callLines(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// logString is a string attribute of a JSON log line.
func logString(t *testing.T, line map[string]any, key string) string {
	t.Helper()
	s, ok := line[key].(string)
	if !ok {
		t.Fatalf("log line %v has no string %q", line, key)
	}
	return s
}

// logEvents logs the session's events, one a line: seq, kind, data.
func logEvents(t *testing.T, evs []wire.Event) {
	t.Helper()
	for _, ev := range evs {
		t.Logf("%d %s %s", ev.Seq, ev.Kind, ev.Data)
	}
}

// eventTimes is the times of the events of kinds, in order.
func eventTimes(evs []wire.Event, kinds ...string) []time.Time {
	var out []time.Time
	for _, ev := range evs {
		if slices.Contains(kinds, ev.Kind) {
			out = append(out, ev.Time)
		}
	}
	return out
}

// inOrder reports whether want occurs in kinds as a subsequence.
func inOrder(kinds []string, want ...string) bool {
	for _, k := range kinds {
		if len(want) > 0 && k == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
}
