package runtime_test

import (
	"errors"
	"flag"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"pgregory.net/rapid"
)

// TestMachineProperties drives the machine with random command streams
// (every kind, every busy mode and configured default modes, callers,
// deployments, duplicates, undecodable commands), step results, commit
// outcomes, crashes, handoffs, ticks and debounce timers firing, and
// checks every effect against the rules after every action (the busy
// modes' invariants: busy_property_test.go).
func TestMachineProperties(t *testing.T) {
	setFlag(t, "rapid.checks", strconv.Itoa(testsize.PickRaced(1000, 200, 1000)))
	rapid.Check(t, property(nil))
	if !testsize.FullSample() {
		return // make test's pass without the race detector checks the coverage of its 1,000 runs
	}
	kinds := append(runtime.BuiltinEvents(), "x.custom", wire.EventCommandSuperseded, wire.EventTurnRolledBack,
		"steer joined", "crash", "flood", "deferred", "priority ahead", "forget", "forgotten", "conflict", "moved", "uncertain",
		"refused mid-step", "refused move", "refused steer")
	kinds = append(kinds, busyCoverage...)
	slices.Sort(kinds)
	for _, k := range slices.Compact(kinds) {
		switch k {
		case runtime.EventMessageOutput:
		case runtime.EventChildStarted, runtime.EventChildCompleted, runtime.EventChildWaiting, runtime.EventChildClosed:
			// subagents have their own property test (child_property_test.go)
		default:
			if coverage.get(k) == 0 {
				t.Errorf("no run reached %q", k)
			}
		}
		t.Logf("%-18s %d", k, coverage.get(k))
	}
}

// TestBrokenRuleIsCaught proves the oracle has teeth: with a deliberately
// broken rule (admit the newest queued delivery instead of the oldest) the
// same property must fail.
func TestBrokenRuleIsCaught(t *testing.T) {
	caught(t, runtime.BreakAdmitOrder, "FIFO")
}

// TestUnbudgetedFloodIsCaught: a machine that admits every queued command
// at a boundary, as if it had no budget, must fail the oracle's size check
// on a flood.
func TestUnbudgetedFloodIsCaught(t *testing.T) {
	caught(t, runtime.BreakBudget, "over the boundary budget", "inputs of")
}

// caught runs the property with a broken rule and wants it to fail with a
// message that contains one of want.
func caught(t *testing.T, broken func(*runtime.Machine), want ...string) {
	setFlag(t, "rapid.nofailfile", "true")
	setFlag(t, "rapid.shrinktime", "2s")
	setFlag(t, "rapid.checks", "1000") // it stops at the first failure
	ft := &fakeTB{name: t.Name()}
	func() {
		defer func() {
			if r := recover(); r != nil && r != errFailNow {
				panic(r)
			}
		}()
		rapid.Check(ft, property(broken))
	}()
	if !ft.failed {
		t.Fatal("the broken rule was not caught")
	}
	for _, w := range want {
		if strings.Contains(ft.log.String(), w) {
			t.Logf("caught as expected: %s", firstLine(ft.log.String(), w))
			return
		}
	}
	t.Fatalf("caught, but not by the %q rule:\n%s", want, ft.log.String())
}

func property(broken func(*runtime.Machine)) func(*rapid.T) {
	return func(t *rapid.T) {
		w := newWorld(t, broken)
		n := rapid.IntRange(40, 250).Draw(t, "actions")
		for range n {
			w.act(rapid.SampledFrom(actions).Draw(t, "action"))
			w.checkIdle()
		}
		w.drain()
	}
}

var actions = []string{
	"accept", "accept", "accept", "accept", "feed", "feed", "feed", "feed",
	"step", "step", "step", "commit", "commit", "commit", "handoff", "crash", "tick", "flood", "fire",
}

func (w *world) act(a string) {
	switch {
	case a == "accept":
		w.accept(w.genCommand())
	case a == "feed" && w.cursor < len(w.stream) && w.view().Ended == "":
		w.now = w.now.Add(time.Duration(rapid.IntRange(0, 1500).Draw(w.t, "elapsed")) * time.Millisecond)
		w.feed()
	case a == "fire":
		w.fire(rapid.IntRange(0, 3).Draw(w.t, "staleFire") == 2)
	case a == "step" && w.step != nil:
		w.stepDone(w.genResult())
	case a == "commit" && w.pending != nil:
		w.commitDone(rapid.IntRange(0, 99).Draw(w.t, "commit"))
	case a == "handoff" && w.handoff != nil:
		w.handoffDone(rapid.Bool().Draw(w.t, "moved"), rapid.SampledFrom([]string{"", runtime.SkipQueued}).Draw(w.t, "skip"))
	case a == "crash" && rapid.IntRange(0, 3).Draw(w.t, "crash") == 0:
		coverage.add("crash")
		w.boot(runtime.BootRecover)
	case a == "tick":
		w.now = w.now.Add(time.Minute)
		w.handle(runtime.Tick{Now: w.now})
	case a == "flood" && rapid.IntRange(0, 11).Draw(w.t, "flood") == 0:
		w.flood()
	}
}

// flood accepts a burst of commands and feeds them all at once, as a
// consumer delivers them while a step runs or a commit is in flight.
func (w *world) flood() {
	coverage.add("flood")
	for range rapid.IntRange(20, 240).Draw(w.t, "floodSize") {
		w.accept(w.genFlood())
	}
	for w.cursor < len(w.stream) && w.view().Ended == "" {
		w.feed()
	}
}

func (w *world) checkIdle() {
	if !w.m.Stopped() {
		w.require(w.m.IdleReason() == w.idleReason(), "IdleReason %q, definition says %q", w.m.IdleReason(), w.idleReason())
	}
}

func (w *world) accept(c runtime.Command) {
	if _, ok := w.firstSeq[c.ID]; !ok {
		w.firstSeq[c.ID] = c.Seq
	}
	w.stream = append(w.stream, c)
}

// feed delivers the next stream command and checks the handoff decision.
func (w *world) feed() {
	c := w.stream[w.cursor]
	w.cursor++
	if w.deleted[c.Seq] {
		return // deleted from the inbox: no cursor delivers it
	}
	dup := w.dup(c)
	if !dup {
		w.decide(c)
	}
	reason, target := w.idleReason(), w.target(c)
	w.fed[c.Seq] = true
	interrupt, was := w.interrupts(c) && !dup, w.cancelled
	w.coverRefused(c, dup)
	effs := w.handle(runtime.Received{Cmd: c, Now: w.now})
	w.require(!interrupt || w.cancelled, "%s %d did not reach the running step", c.Kind, c.Seq)
	w.require(interrupt || w.cancelled == was, "%s %d (refused %q) cancelled the running step", c.Kind, c.Seq, c.Refused)
	got := len(effs) > 0 && isHandoff(effs[0])
	want := !dup && target != "" && reason == ""
	w.require(got == want, "command %d (%s from %s, idle=%q): handoff=%v, want %v", c.Seq, c.Kind, c.Deployment, reason, got, want)
	switch {
	case got:
		w.triggers[c.Seq] = ""
	case !dup && target != "":
		w.wantSkip[c.Seq] = reason
	}
}

// coverRefused counts the refused commands' scenarios.
func (w *world) coverRefused(c runtime.Command, dup bool) {
	switch {
	case dup || c.Refused == "":
	case w.step != nil:
		coverage.add("refused mid-step")
	case c.Kind == runtime.KindMove:
		coverage.add("refused move")
	}
	if !dup && steers(c) && c.Refused != "" {
		coverage.add("refused steer")
	}
}

func isHandoff(e runtime.Effect) bool { _, ok := e.(runtime.Handoff); return ok }

// interrupts reports whether c must cancel the running step at once:
// cancel, reset, the armed timer's timeout, and an interrupt or rollback
// delivery of the live turn's caller.
func (w *world) interrupts(c runtime.Command) bool {
	v := w.view()
	switch {
	case w.step == nil || declined(c):
		return false
	case c.Kind == runtime.KindCancel || c.Kind == runtime.KindReset:
		return true
	case c.Kind == runtime.KindDeliver:
		return w.interrupting(c)
	}
	return c.Kind == runtime.KindTimeout && v.Timer != nil && v.Timer.ID == c.TimerID
}

// stepDone finishes the running step with r. The boundary it runs folds
// r into the commit it forms at once, or discards it (cancelled), and
// adds what foldUsage says to the session's usage.
func (w *world) stepDone(r runtime.StepResult) {
	in := w.step.Input
	w.aborted[in.Key()] = w.cancelled
	u := w.foldUsage(r, w.cancelled)
	w.nextFold = &u
	w.step = nil
	w.handle(runtime.StepDone{TurnID: in.TurnID, Step: in.Step, Result: r})
	w.require(w.nextFold == nil, "the finished step %s formed no commit", in.Key())
}

// commitDone lands the commit (ok, or an uncertain write resolved as
// landed) or loses it (conflict: ownership lost, a new owner boots).
func (w *world) commitDone(dice int) {
	switch { // rapid biases integers toward small values: rare cases sit mid-range
	case !w.uncertain && dice >= 40 && dice < 48:
		coverage.add("uncertain")
		w.handle(runtime.CommitDone{Outcome: runtime.CommitUncertain})
	case dice < 70 || dice >= 76:
		c := *w.pending
		w.checkCommit(w.committed, c)
		prev := w.committed
		w.committed, w.pending, w.uncertain = c.Snapshot, nil, false
		w.checkArmed(prev, c.Snapshot, w.handle(runtime.CommitDone{Outcome: runtime.CommitOK}))
	default:
		coverage.add("conflict")
		w.pending = nil
		w.handle(runtime.CommitDone{Outcome: runtime.CommitConflict})
		w.require(w.m.Stopped(), "machine runs on after a conflict")
		w.boot(runtime.BootRecover)
	}
}

func (w *world) handoffDone(moved bool, skip string) {
	h := *w.handoff
	w.handoff = nil
	id := "h" + strconv.Itoa(w.runs)
	if !moved {
		w.triggers[h.Trigger.Seq] = skip
		d := runtime.HandoffDone{SkipReason: skip, HandoffID: id}
		if skip == "" {
			d.Failure = "start: no responders"
		}
		w.handle(d)
		return
	}
	coverage.add("moved")
	w.handle(runtime.HandoffDone{Moved: true, HandoffID: id})
	w.require(w.m.Stopped(), "machine runs on after a handoff")
	from := w.cfg.Deployment
	w.cfg.Deployment = h.Target
	w.bootWith(runtime.Boot{Reason: runtime.BootHandoff, Handoff: &runtime.HandoffInfo{
		ID: id, From: from, Trigger: runtime.Ref{Seq: h.Trigger.Seq, ID: h.Trigger.ID}, Epoch: uint64(w.runs + 1),
	}})
}

// drain settles everything and checks that no command was dropped. Its
// bound on settling steps (a livelock would exhaust it, and then the
// checks below fail) grows with the stream: every command may cost a few
// steps (fed, committed, a resume accepted while a queued pause re-pauses
// the session), and floods make streams of a thousand commands.
func (w *world) drain() {
	for i := 0; i < max(2000, 4*len(w.stream)) && w.drainOne(); i++ {
		w.checkIdle()
	}
	w.require(w.pending == nil && w.step == nil && w.handoff == nil, "drain did not settle")
	w.checkOutcomes()
	if w.committed.Ended != "" {
		return
	}
	for _, c := range w.stream {
		if !w.isDup(c) {
			w.require(w.done(w.committed, c.Seq), "command %d (%s) never processed", c.Seq, c.Kind)
			applied := w.outcomes[c.Seq] == runtime.EventCommandApplied
			w.require(declined(c) || !applied || w.applied[c.ID] == 1, "command %d applied %d times", c.Seq, w.applied[c.ID])
			w.require(c.Refused == "" || c.Rejected != "" || w.refused[c.ID] == 1, "refused command %d recorded %d times", c.Seq, w.refused[c.ID])
		}
	}
}

func (w *world) drainOne() bool {
	v := w.view()
	switch {
	case w.handoff != nil:
		w.handoffDone(false, "")
	case w.pending != nil:
		w.commitDone(0)
	case w.step != nil:
		w.stepDone(runtime.StepResult{Outcome: runtime.OutcomeDone})
	case v.Ended != "":
		return false
	case w.cursor < len(w.stream):
		w.feed()
	case w.dtimer != nil: // the debounce window's timer fires
		w.fire(false)
	case v.Waits.Input != nil:
		w.accept(w.command(runtime.KindInputResponse, func(c *runtime.Command) { c.RequestID = v.Waits.Input.RequestID }))
	case v.Waits.Auth != nil:
		w.accept(w.command(runtime.KindAuthCallback, func(c *runtime.Command) { c.AttemptID = v.Waits.Auth.AttemptID }))
	case v.Paused:
		w.accept(w.command(runtime.KindResume, nil))
	default:
		return false
	}
	return true
}

// command builds a plain command from the current deployment.
func (w *world) command(k runtime.Kind, set func(*runtime.Command)) runtime.Command {
	seq := uint64(1)
	if n := len(w.stream); n > 0 {
		seq = w.stream[n-1].Seq + 1
	}
	c := runtime.Command{Seq: seq, ID: "c" + strconv.FormatUint(seq, 10), Kind: k, Deployment: w.cfg.Deployment}
	if set != nil {
		set(&c)
	}
	return c
}

// setFlag sets a rapid flag for one test unless the command line set it.
func setFlag(t *testing.T, name, value string) {
	f := flag.Lookup(name)
	if f == nil {
		t.Fatalf("no flag %s", name)
	}
	if cmdline()[name] {
		return
	}
	old := f.Value.String()
	_ = flag.Set(name, value)
	t.Cleanup(func() { _ = flag.Set(name, old) })
}

// cmdline is the set of flags the command line set, taken before any test
// sets one (flag.Visit reports those too).
var cmdline = sync.OnceValue(func() map[string]bool {
	set := map[string]bool{}
	flag.Visit(func(v *flag.Flag) { set[v.Name] = true })
	return set
})

var errFailNow = errors.New("fakeTB: FailNow")

// fakeTB is a rapid.TB that records a failure instead of failing the test.
type fakeTB struct {
	name   string
	failed bool
	log    strings.Builder
}

func (f *fakeTB) Helper()                       {}
func (f *fakeTB) Name() string                  { return f.name }
func (f *fakeTB) Logf(format string, a ...any)  { f.log.WriteString(sprintf(format, a...) + "\n") }
func (f *fakeTB) Log(a ...any)                  { f.log.WriteString(sprint(a...) + "\n") }
func (f *fakeTB) Skipf(format string, a ...any) { f.Logf(format, a...) }
func (f *fakeTB) Skip(a ...any)                 { f.Log(a...) }
func (f *fakeTB) SkipNow()                      {}
func (f *fakeTB) Errorf(format string, a ...any) {
	f.Logf(format, a...)
	f.failed = true
}
func (f *fakeTB) Error(a ...any) { f.Log(a...); f.failed = true }
func (f *fakeTB) Fatalf(format string, a ...any) {
	f.Errorf(format, a...)
	panic(errFailNow)
}
func (f *fakeTB) Fatal(a ...any) { f.Error(a...); panic(errFailNow) }
func (f *fakeTB) FailNow()       { f.failed = true; panic(errFailNow) }
func (f *fakeTB) Fail()          { f.failed = true }
func (f *fakeTB) Failed() bool   { return f.failed }

func firstLine(s, want string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, want) {
			return strings.TrimSpace(l)
		}
	}
	line, _, _ := strings.Cut(s, "\n")
	return line
}
