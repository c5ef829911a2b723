package harness

import (
	"fmt"
	"github.com/baton-rt/baton/internal/execlog"
	"testing"
	"time"

	"github.com/baton-rt/baton/wire"
)

// TestRerunEvidence: a second run is allowed only by a stop of the first
// run's own process, for its session (or all), logged between the two runs.
func TestRerunEvidence(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	runs := []execlog.Exec{{SessionID: "s", StepKey: "t1/1", Process: "a", At: at(0)}, {SessionID: "s", StepKey: "t1/1", Process: "b", At: at(100)}}
	for _, tc := range []struct {
		name string
		stop []Stop
		ok   bool
	}{
		{"no stop", nil, false},
		{"fence of the first run's process", []Stop{{Process: "a", At: at(50)}}, true},
		{"its session stopped", []Stop{{Process: "a", Session: "s", At: at(50)}}, true},
		{"another session stopped", []Stop{{Process: "a", Session: "x", At: at(50)}}, false},
		{"another process fenced", []Stop{{Process: "b", At: at(50)}}, false},
		{"fenced before the first run", []Stop{{Process: "a", At: at(-1)}}, false},
		{"fenced after the second run began", []Stop{{Process: "a", At: at(101)}}, false},
		{"the stream's record of that step", []Stop{{Session: "s", Step: "t1/1", At: at(60)}}, true},
		{"the stream's record of another step", []Stop{{Session: "s", Step: "t1/2", At: at(60)}}, false},
	} {
		_, err := RerunEvidence(runs, tc.stop)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	three := append(runs, execlog.Exec{SessionID: "s", StepKey: "t1/1", Process: "a", At: at(200)})
	if _, err := RerunEvidence(three, []Stop{{Process: "a", At: at(50)}}); err == nil {
		t.Error("a third run with the second unstopped passed")
	}
	if _, err := RerunEvidence(three, []Stop{{Process: "a", At: at(50)}, {Process: "b", Session: "s", At: at(150)}}); err != nil {
		t.Errorf("three runs, two stops: %v", err)
	}
	if err := UncommittedEvidence(runs[:1], nil); err == nil {
		t.Error("an uncommitted run with no stop passed")
	}
	if err := UncommittedEvidence(runs[:1], []Stop{{Process: "a", At: at(500)}}); err != nil {
		t.Errorf("an uncommitted run stopped later: %v", err)
	}
}

// TestCheckStepRuns: committed steps from turn.step events; runs matched by
// session; the order of runs is their start time, not the log's order.
func TestCheckStepRuns(t *testing.T) {
	t0 := time.Now()
	step := func(seq, n uint64) wire.Event {
		return ev(seq, wire.EventTurnStep, wire.TurnStep{TurnID: "t1", Step: n})
	}
	evs := []wire.Event{step(1, 1), step(2, 2)}
	execs := []execlog.Exec{
		{SessionID: "s", StepKey: "t1/2", Process: "b", At: t0.Add(3 * time.Second)},
		{SessionID: "s", StepKey: "t1/1", Process: "a", At: t0},
		{SessionID: "s", StepKey: "t1/2", Process: "a", At: t0.Add(time.Second)},
		{SessionID: "other", StepKey: "t1/1", Process: "a", At: t0.Add(time.Second)},
	}
	if _, err := CheckStepRuns(execs, "s", evs, nil); err == nil {
		t.Fatal("t1/2 ran twice with no stop and passed")
	}
	reran, err := CheckStepRuns(execs, "s", evs, LogStops("a", fmt.Sprintf(`{"time":%q,"msg":"fenced: stopping every session"}`+"\n", t0.Add(2*time.Second).Format(time.RFC3339Nano))))
	if err != nil || len(reran) != 1 || reran[0] != "t1/2" {
		t.Fatalf("a fence logged between the runs: reran %v, %v", reran, err)
	}
	if _, err := CheckStepRuns(execs, "s", append(evs, step(3, 3)), nil); err == nil {
		t.Fatal("a committed step that never ran passed")
	}
}

// TestThawStops: a frozen process's stops logged after the thaw and
// before its lease came back are evidence from the freeze on; a stop
// after the lease came back, or before the thaw, is not moved.
func TestThawStops(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	line := func(ms int, msg, session string) string {
		return fmt.Sprintf(`{"time":%q,"msg":%q,"session":%q}`+"\n", at(ms).Format(time.RFC3339Nano), msg, session)
	}
	runs := []execlog.Exec{{SessionID: "s", StepKey: "t1/1", Process: "a", At: at(0)}, {SessionID: "s", StepKey: "t1/1", Process: "b", At: at(3000)}}
	from, to := at(1000), at(5000)
	for _, tc := range []struct {
		name string
		log  string
		ok   bool
	}{
		{"fenced at the thaw", line(5050, "lease not renewed in time: every session pauses until a renewal lands", "") +
			line(5060, "fenced: stopping every session", ""), true},
		{"its session stopped at the thaw", line(5060, "session stopped: process fenced", "s"), true},
		{"another session stopped", line(5060, "session stopped: process fenced", "x"), false},
		{"the lease came back first", line(5050, "lease renewed after a pause: every session goes on", "") +
			line(5060, "fenced: stopping every session", ""), false},
		{"a stop before the thaw", line(900, "fenced: stopping every session", ""), false},
		{"no stop", line(5050, "lease acquired", ""), false},
	} {
		_, err := RerunEvidence(runs, ThawStops("a", tc.log, from, to))
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
	if _, err := RerunEvidence(runs, ThawStops("a", line(5060, "fenced: stopping every session", ""), at(3500), to)); err == nil {
		t.Error("a freeze that began after the second run evidenced the first")
	}
}
