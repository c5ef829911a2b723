package runtime_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// TestBusyRegressions holds the minimal reproductions of machine bugs the
// busy-mode property test (busy_property_test.go) found; each asserts the
// documented behaviour.
func TestBusyRegressions(t *testing.T) {
	// An interrupt that cancelled the running step must not be superseded
	// by a latest delivery of the same caller before the step ends: the
	// machine then folded the cancelled step's result (turn.step) instead
	// of discarding it (step.interrupted).
	t.Run("an interrupt that cancelled the step is not superseded", func(t *testing.T) {
		d := newKB(t, runtime.Config{})
		d.deliver("", "")
		d.deliver(runtime.ModeInterrupt, "")
		if !d.cancelled {
			t.Fatal("the interrupt did not cancel the running step")
		}
		d.deliver(runtime.ModeLatest, "")
		d.finish(runtime.StepResult{Outcome: runtime.OutcomeDone})
		if d.has("turn.step", `"turnId":"t1"`) || !d.has("step.interrupted", `"turnId":"t1"`) {
			t.Fatalf("cancelled step t1/1 was folded:\n%s", d.events())
		}
	})
	// A debounce window of two deliveries closes after the session's
	// tokens are spent: startTurn ended the turn at once (limit.reached)
	// and closeWindow's join appended to a nil turn (a panic).
	t.Run("a window closes after the session limit", func(t *testing.T) {
		d := newKB(t, runtime.Config{Limits: runtime.Limits{MaxTokensPerSession: 10}})
		d.deliver("", "")
		d.finish(runtime.StepResult{Outcome: runtime.OutcomeDone, Usage: runtime.Usage{InputTokens: 10}})
		d.deliver(runtime.ModeDebounce, "")
		d.deliver(runtime.ModeDebounce, "")
		w := d.m.Snapshot().Debounce
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("timeout of window %s panicked: %v", w.TimerID, r)
			}
		}()
		d.recv(runtime.Command{Kind: runtime.KindTimeout, TimerID: w.TimerID})
	})
	// command.superseded and turn.rolled_back are built-in kinds: were
	// they missing from BuiltinEvents, Reserved would let an agent
	// register them (the owner's --agent-event-kinds check too) and a step
	// commit them — a second terminal outcome for a command.
	t.Run("busy event kinds are reserved", func(t *testing.T) {
		for _, k := range []string{wire.EventCommandSuperseded, wire.EventTurnRolledBack} {
			if !runtime.Reserved(k) {
				t.Errorf("runtime.Reserved(%q) = false", k)
			}
		}
		d := newKB(t, runtime.Config{EventKinds: []string{wire.EventCommandSuperseded}})
		d.deliver("", "")
		d.finish(runtime.StepResult{Outcome: runtime.OutcomeDone, Events: []runtime.Event{
			runtime.NewEvent(wire.EventCommandSuperseded, runtime.Fields{"commandId": "c1", "seq": 1, "by": 2})}})
		if d.has(wire.EventCommandSuperseded, `"commandId":"c1"`) {
			t.Fatalf("a step committed command.superseded for c1, applied before:\n%s", d.events())
		}
	})
	// A step whose result has an unregistered event kind fails (error
	// event_invalid), and docs/runtime.md counts a failed step's usage
	// (validate dropped it).
	t.Run("an invalid step's usage counts", func(t *testing.T) {
		d := newKB(t, runtime.Config{})
		d.deliver("", "")
		u := runtime.Usage{InputTokens: 10, OutputTokens: 5}
		d.finish(runtime.StepResult{Outcome: runtime.OutcomeDone, Usage: u, Events: []runtime.Event{runtime.NewEvent("x.unregistered", nil)}})
		if got := d.m.Snapshot().Usage; got != u {
			t.Fatalf("session usage %+v after a failed step that reported %+v", got, u)
		}
	})
}

// kb is a minimal driver: every commit lands at once.
type kb struct {
	t         *testing.T
	m         *runtime.Machine
	step      *runtime.RunStep
	cancelled bool
	seq       uint64
	log       []runtime.Event
}

func newKB(t *testing.T, cfg runtime.Config) *kb {
	cfg.SessionID, cfg.RunID, cfg.Deployment = "s", "r1", "A"
	m, err := runtime.NewMachine(cfg, runtime.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	d := &kb{t: t, m: m}
	d.handle(runtime.Boot{Now: epoch, Reason: runtime.BootNew})
	return d
}

func (d *kb) handle(in runtime.Input) {
	effs, err := d.m.Handle(in)
	if err != nil {
		d.t.Fatalf("%T: %v", in, err)
	}
	for _, e := range effs {
		switch e := e.(type) {
		case runtime.Commit:
			d.log = append(d.log, e.Snapshot.Outbox...)
			d.handle(runtime.CommitDone{Outcome: runtime.CommitOK})
		case runtime.RunStep:
			d.step, d.cancelled = &e, false
		case runtime.CancelStep:
			d.cancelled = true
		}
	}
}

func (d *kb) recv(c runtime.Command) {
	d.seq++
	c.Seq, c.ID, c.Deployment = d.seq, fmt.Sprint("c", d.seq), "A"
	d.handle(runtime.Received{Cmd: c, Now: epoch})
}

func (d *kb) deliver(mode, caller string) {
	c := runtime.Command{Kind: runtime.KindDeliver, Mode: mode, Caller: caller, Text: "hi"}
	if mode == runtime.ModeDebounce {
		c.DebounceMs = 1000
	}
	d.recv(c)
}

func (d *kb) finish(r runtime.StepResult) {
	s := d.step
	if s == nil {
		d.t.Fatal("no step runs")
	}
	d.step = nil
	d.handle(runtime.StepDone{TurnID: s.Input.TurnID, Step: s.Input.Step, Result: r})
}

func (d *kb) has(kind, data string) bool {
	for _, e := range d.log {
		if e.Kind == kind && strings.Contains(string(e.Data), data) {
			return true
		}
	}
	return false
}

func (d *kb) events() string {
	var b strings.Builder
	for _, e := range d.log {
		fmt.Fprintf(&b, "  %d %s %s\n", e.Seq, e.Kind, e.Data)
	}
	return b.String()
}
