package runtime_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/baton-rt/baton/internal/execlog"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
)

// driven feeds a machine as a driver would with every commit landing and
// every step run by the demo agent, and records what it was asked to do.
type driven struct {
	t       *testing.T
	m       *runtime.Machine
	commits []runtime.Commit
	steps   []runtime.StepInput
	effects []string
	// beforeStep counts the commits before the first step started.
	beforeStep int
}

func (d *driven) feed(in runtime.Input) error {
	pending := []runtime.Input{in}
	for len(pending) > 0 {
		in, pending = pending[0], pending[1:]
		effs, err := d.m.Handle(in)
		if err != nil {
			return err
		}
		for _, e := range effs {
			d.effects = append(d.effects, reflect.TypeOf(e).Name())
			switch e := e.(type) {
			case runtime.Commit:
				d.commits = append(d.commits, e)
				pending = append(pending, runtime.CommitDone{Outcome: runtime.CommitOK})
			case runtime.RunStep:
				if len(d.steps) == 0 {
					d.beforeStep = len(d.commits)
				}
				d.steps = append(d.steps, e.Input)
				a := &demo.Agent{Log: &execlog.MemLog{}, Process: "p", Sleep: sleepNow}
				done, _ := runtime.Run(context.Background(), a, e.Input)
				pending = append(pending, done)
			}
		}
	}
	return nil
}

func (d *driven) must(in runtime.Input) {
	d.t.Helper()
	if err := d.feed(in); err != nil {
		d.t.Fatal(err)
	}
}

// kinds are the event kinds of commits' outboxes, in order.
func kinds(cs []runtime.Commit) []string {
	var out []string
	for _, c := range cs {
		for _, e := range c.Snapshot.Outbox {
			out = append(out, e.Kind)
		}
	}
	return out
}

// handedOff is the snapshot of a session that ran one turn on v1, as its
// successor on v2 loads it.
func handedOff(t *testing.T) runtime.Snapshot {
	t.Helper()
	m, err := runtime.NewMachine(runtime.Config{SessionID: "s1", RunID: "run-1", Deployment: "v1"}, runtime.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	d := &driven{t: t, m: m}
	d.must(runtime.Boot{Now: epoch, Reason: runtime.BootNew, Commit: true})
	d.must(runtime.Received{Cmd: runtime.Command{Seq: 1, ID: "c1", Kind: runtime.KindDeliver, Deployment: "v1", Text: "hello"}, Now: epoch})
	if len(d.steps) != 1 || m.IdleReason() != "" {
		t.Fatalf("the first turn: steps %d, idle reason %q", len(d.steps), m.IdleReason())
	}
	return m.Snapshot()
}

// A handoff successor's boot that carries the trigger (Boot.First) commits
// once before the trigger's step where a boot and then the trigger's
// Received commit twice, with the same events in the same order, the same
// step and the same state.
// A duplicate First commits the boot alone; a First the machine would hand
// off, or one without seq or ID, is refused before the boot changes
// anything, and the machine still boots.
func TestBootFirstMergesTheTriggersAdmission(t *testing.T) {
	snap := handedOff(t)
	cfg := runtime.Config{SessionID: "s1", RunID: "run-2", Deployment: "v2"}
	arrival := &runtime.HandoffInfo{ID: "h1", From: "v1", Trigger: runtime.Ref{Seq: 2, ID: "t2"}, Epoch: 2}
	boot := runtime.Boot{Now: epoch, Reason: runtime.BootHandoff, Handoff: arrival, Commit: true}
	for _, tt := range []struct {
		name  string
		cmd   runtime.Command
		saved int // commits First saves
		step  bool
	}{
		{"the trigger", runtime.Command{Seq: 2, ID: "t2", Kind: runtime.KindDeliver, Deployment: "v2", Text: "moved"}, 1, true},
		{"a cancel", runtime.Command{Seq: 2, ID: "t2", Kind: runtime.KindCancel}, 1, false},
		{"a duplicate", runtime.Command{Seq: 1, ID: "c1", Kind: runtime.KindDeliver, Deployment: "v2", Text: "again"}, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			newMachine := func() *driven {
				m, err := runtime.NewMachine(cfg, snap)
				if err != nil {
					t.Fatal(err)
				}
				return &driven{t: t, m: m}
			}
			two := newMachine()
			two.must(boot)
			two.must(runtime.Received{Cmd: tt.cmd, Now: epoch})
			one := newMachine()
			merged := boot
			merged.First = &runtime.Received{Cmd: tt.cmd, Now: epoch}
			one.must(merged)

			if len(one.commits)+tt.saved != len(two.commits) {
				t.Fatalf("boot with First committed %d times, boot then Received %d: want %d fewer: %v",
					len(one.commits), len(two.commits), tt.saved, one.effects)
			}
			if tt.step && (one.beforeStep != 1 || two.beforeStep != 2) {
				t.Fatalf("commits before the step: with First %d, boot then Received %d; want 1 and 2", one.beforeStep, two.beforeStep)
			}
			if got, want := kinds(one.commits), kinds(two.commits); !reflect.DeepEqual(got, want) {
				t.Fatalf("events committed with First %v, boot then Received %v", got, want)
			}
			if (len(one.steps) > 0) != tt.step || !reflect.DeepEqual(one.steps, two.steps) {
				t.Fatalf("steps with First %+v, boot then Received %+v", one.steps, two.steps)
			}
			a, b := one.m.Snapshot(), two.m.Snapshot()
			if a.Writer.Write+uint64(tt.saved) != b.Writer.Write {
				t.Fatalf("writes: with First %d, boot then Received %d", a.Writer.Write, b.Writer.Write)
			}
			a.Writer, a.Outbox, b.Outbox = b.Writer, nil, nil // the last commit's events differ by what First merged
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("state with First:\n%+v\nboot then Received:\n%+v", a, b)
			}
		})
	}
	for _, bad := range []struct {
		name string
		cmd  runtime.Command
	}{
		{"stamped by another deployment", runtime.Command{Seq: 2, ID: "t2", Kind: runtime.KindDeliver, Deployment: "v3", Text: "elsewhere"}},
		{"a move elsewhere", runtime.Command{Seq: 2, ID: "t2", Kind: runtime.KindMove, Target: "v3"}},
		{"no seq", runtime.Command{ID: "t2", Kind: runtime.KindDeliver, Deployment: "v2"}},
	} {
		t.Run("refused: "+bad.name, func(t *testing.T) {
			m, err := runtime.NewMachine(cfg, snap)
			if err != nil {
				t.Fatal(err)
			}
			b := boot
			b.First = &runtime.Received{Cmd: bad.cmd, Now: epoch}
			if _, err := m.Handle(b); !errors.Is(err, runtime.ErrInvalidCommand) {
				t.Fatalf("boot with First %+v: %v, want ErrInvalidCommand", bad.cmd, err)
			}
			if !reflect.DeepEqual(m.Snapshot(), snap) || len(m.Queued()) != 0 {
				t.Fatal("a refused First changed the machine")
			}
			d := &driven{t: t, m: m}
			d.must(boot)
			if len(d.commits) != 1 {
				t.Fatalf("the boot after a refused First committed %d times, want 1", len(d.commits))
			}
		})
	}
}
