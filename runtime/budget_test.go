package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/wire"
)

// A flood of commands between two boundaries (docs/runtime.md R3): each
// boundary admits what fits its budget, the rest drain in the boundaries
// that follow its commit, every command is applied once and in order, and
// cancel, reset and clear are never deferred past the next boundary.

// floodN is the flood of these tests (the size the report measured).
const floodN = 2000

// flood drives one machine as the owner's driver does, with IDs as long as
// a real owner's: commits land at once, steps run the demo agent (sleeps
// return at once) unless the test feeds their result itself.
type flood struct {
	t       *testing.T
	m       *runtime.Machine
	seq     uint64
	commits []runtime.Commit
	step    *runtime.RunStep
	steps   []runtime.StepInput
	auto    bool     // run each step as it starts
	deleted []uint64 // applied commands deleted from the inbox (Forget)
}

func newFlood(t *testing.T) *flood {
	cfg := runtime.Config{SessionID: "01KA0SESSION0000000000000S", RunID: "01KA0RUN000000000000000000",
		Deployment: "deployment-v1", EventKinds: (&demo.Agent{}).EventKinds(), RecentIDs: wire.MaxAppliedIDs}
	m, err := runtime.NewMachine(cfg, runtime.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	f := &flood{t: t, m: m}
	f.handle(runtime.Boot{Now: epoch, Reason: runtime.BootNew})
	return f
}

func (f *flood) handle(in runtime.Input) {
	f.t.Helper()
	effs, err := f.m.Handle(in)
	if err != nil {
		f.t.Fatalf("Handle(%T): %v", in, err)
	}
	var forgotten []uint64
	for _, e := range effs {
		switch e := e.(type) {
		case runtime.Forget:
			f.deleted = append(f.deleted, e.Seqs...)
			forgotten = append(forgotten, e.Seqs...)
		case runtime.Commit:
			f.check(e)
			f.commits = append(f.commits, e)
			f.handle(runtime.CommitDone{Outcome: runtime.CommitOK})
		case runtime.RunStep:
			f.step = &e
			f.steps = append(f.steps, e.Input)
			if f.auto {
				f.runStep()
			}
		}
	}
	if len(forgotten) > 0 {
		f.handle(runtime.Forgotten{Seqs: forgotten})
	}
}

// runStep runs the running step with the demo agent.
func (f *flood) runStep() {
	a := &demo.Agent{Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}
	d, _ := runtime.Run(context.Background(), a, f.step.Input)
	f.step = nil
	f.handle(d)
}

// recv sends the next command of the inbox.
func (f *flood) recv(id string, k runtime.Kind, set func(*runtime.Command)) runtime.Command {
	f.seq++
	c := runtime.Command{Seq: f.seq, ID: id, Kind: k, Deployment: "deployment-v1"}
	if set != nil {
		set(&c)
	}
	f.handle(runtime.Received{Cmd: c})
	return c
}

func text(s string) func(*runtime.Command) { return func(c *runtime.Command) { c.Text = s } }

// check: what the commit's admissions carry — its outbox from the first
// applied command on (a folded step's events come first, bounded by the
// agent's own limits), encoded as the driver stores it — fits the
// boundary's budget and reserve; the turn's inputs their caps; the whole
// snapshot the checkpoint.
func (f *flood) check(c runtime.Commit) {
	f.t.Helper()
	n, from := 0, slices.IndexFunc(c.Snapshot.Outbox, func(e runtime.Event) bool { return e.Kind == runtime.EventCommandApplied })
	for _, e := range c.Snapshot.Outbox[max(from, 0):] {
		data := e.Data
		if len(data) == 0 {
			data = json.RawMessage("{}")
		}
		b, err := wire.EncodeEvent(demoEvents, wire.Event{SessionID: "01KA0SESSION0000000000000S", Seq: e.Seq,
			Time: time.Date(2026, 12, 31, 23, 59, 59, 999999999, time.UTC), OwnerRunID: "01KA0RUN000000000000000000",
			DeploymentID: "deployment-v1", Kind: e.Kind, V: max(e.V, 1), Data: data})
		if err != nil {
			f.t.Fatalf("event %s: %v", e.Kind, err)
		}
		n += len(b)
	}
	if limit := wire.MaxBoundaryBytes + wire.BoundaryReserveBytes + 4<<10; n > limit {
		f.t.Fatalf("commit #%d: outbox of %d events is %d bytes, over %d", len(f.commits)+1, len(c.Snapshot.Outbox), n, limit)
	}
	if t := c.Snapshot.Turn; t != nil {
		b, _ := json.Marshal(t.Inputs)
		if len(t.Inputs) > wire.MaxTurnInputs || len(b) > wire.MaxTurnInputBytes+len(t.Inputs)+2 {
			f.t.Fatalf("turn %s waits with %d inputs of %d bytes", t.ID, len(t.Inputs), len(b))
		}
	}
	if b, _ := json.Marshal(c.Snapshot); len(b) > wire.MaxCheckpointBytes {
		f.t.Fatalf("snapshot of %d bytes", len(b))
	}
}

// applied lists the commands applied, commit by commit.
func (f *flood) applied() [][]runtime.Ref {
	out := make([][]runtime.Ref, len(f.commits))
	for i, c := range f.commits {
		out[i] = c.Applied
	}
	return out
}

// checkAll: every command in ids applied exactly once, in inbox order
// (except the one named ahead, which may pass earlier ones).
func (f *flood) checkAll(ids []string, ahead string) {
	f.t.Helper()
	var got []string
	for _, refs := range f.applied() {
		for _, r := range refs {
			got = append(got, r.ID)
		}
	}
	var want []string
	for _, id := range got {
		if slices.Contains(ids, id) && id != ahead {
			want = append(want, id)
		}
	}
	rest := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == ahead })
	if !slices.Equal(want, rest) {
		f.t.Fatalf("applied %d of %d flood commands, or out of order", len(want), len(rest))
	}
	if ahead != "" && !slices.Contains(got, ahead) {
		f.t.Fatalf("%s never applied", ahead)
	}
	if q := f.m.Queued(); len(q) > 0 {
		f.t.Fatalf("%d commands still queued", len(q))
	}
}

// startSleep starts a turn whose first step is running.
func (f *flood) startSleep() {
	f.recv("d0", runtime.KindDeliver, text("/sleep 10s"))
	if f.step == nil {
		f.t.Fatal("no step running")
	}
}

// TestPauseResumeFloodDrainsInBoundedCommits: 2,000 pause/resume commands
// received during one step are applied over several commits, each within
// the budget, once each and in order; the turn's next step runs after.
func TestPauseResumeFloodDrainsInBoundedCommits(t *testing.T) {
	f := newFlood(t)
	f.startSleep()
	before := len(f.commits)
	ids := make([]string, floodN)
	for i := range ids {
		k := runtime.KindPause
		if i%2 == 1 {
			k = runtime.KindResume
		}
		ids[i] = fmt.Sprintf("f%04d", i)
		f.recv(ids[i], k, nil)
	}
	f.auto = true
	f.runStep()
	f.checkAll(ids, "")
	if n := len(f.commits) - before; n < 10 {
		t.Fatalf("the flood drained in %d commits: no budget at work", n)
	}
	if s := f.m.Snapshot(); s.Paused || s.Turn != nil {
		t.Fatalf("paused=%v turn=%+v after the flood: the turn's last step did not run", s.Paused, s.Turn)
	}
	if last := f.steps[len(f.steps)-1]; last.Key() != "t1/2" {
		t.Fatalf("last step %s, want t1/2", last.Key())
	}
}

// TestCancelInFloodAppliesAtTheNextBoundary: a cancel received behind
// 1,500 pause/resume commands is applied in the first commit after the
// interrupted step — ahead of the earlier commands that commit leaves for
// later — and the rest follow in order.
func TestCancelInFloodAppliesAtTheNextBoundary(t *testing.T) {
	f := newFlood(t)
	f.startSleep()
	before := len(f.commits)
	ids := make([]string, floodN)
	cancelAt := floodN * 3 / 4
	for i := range ids {
		k := runtime.KindPause
		switch {
		case i == cancelAt:
			k = runtime.KindCancel
		case i%2 == 1:
			k = runtime.KindResume
		}
		ids[i] = fmt.Sprintf("f%04d", i)
		f.recv(ids[i], k, nil)
	}
	f.auto = true
	f.handle(runtime.StepDone{TurnID: "t1", Step: 1, Result: runtime.StepResult{Error: "context canceled"}})
	first := f.commits[before]
	if !slices.ContainsFunc(first.Applied, func(r runtime.Ref) bool { return r.ID == ids[cancelAt] }) {
		t.Fatalf("the cancel is not in the first commit after the step (it applied %d commands)", len(first.Applied))
	}
	if len(first.Applied) > cancelAt/2 {
		t.Fatalf("the first commit applied %d commands: no budget at work", len(first.Applied))
	}
	kinds := eventKinds(first.Snapshot.Outbox)
	if !slices.Contains(kinds, runtime.EventStepInterrupted) || !slices.Contains(kinds, runtime.EventTurnCancelled) {
		t.Fatalf("first commit: %v", kinds)
	}
	f.checkAll(ids, ids[cancelAt])
	if n := len(f.steps); n != 1 {
		t.Fatalf("%d steps ran after the cancel", n-1)
	}
}

// TestClearInFloodAppliesAtTheNextBoundary: a clear queued ahead of 2,000
// answers is admitted at the boundary that settles the turn, although the
// budget leaves most of the answers for later boundaries.
func TestClearInFloodAppliesAtTheNextBoundary(t *testing.T) {
	f := newFlood(t)
	f.recv("d0", runtime.KindDeliver, text("hello"))
	before := len(f.commits)
	clear := f.recv("clear", runtime.KindClear, nil)
	ids := []string{clear.ID}
	for i := range floodN {
		id := fmt.Sprintf("a%04d", i)
		ids = append(ids, id)
		f.recv(id, runtime.KindInputResponse, func(c *runtime.Command) {
			c.RequestID, c.Value = "stale", json.RawMessage(`"x"`)
		})
	}
	f.auto = true
	f.runStep() // the turn completes: the session settles
	first := f.commits[before]
	if !slices.ContainsFunc(first.Applied, func(r runtime.Ref) bool { return r.ID == "clear" }) {
		t.Fatalf("the clear is not in the first commit after the turn settled (%d applied)", len(first.Applied))
	}
	if len(first.Applied) > floodN/4 {
		t.Fatalf("the first commit applied %d commands: no budget at work", len(first.Applied))
	}
	f.checkAll(ids, "clear")
}

// TestSteerFloodJoinsStepByStep: 2,000 steers received during one step
// join the turn up to the inputs' caps per step; the ones left when the
// turn ends start the next turn, which the rest join; each is an input of
// exactly one step, in inbox order.
func TestSteerFloodJoinsStepByStep(t *testing.T) {
	f := newFlood(t)
	f.startSleep()
	ids := make([]string, floodN)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%04d", i)
		f.recv(ids[i], runtime.KindDeliver, func(c *runtime.Command) { c.Mode, c.Text = runtime.ModeSteer, "steer "+ids[i] })
	}
	f.auto = true
	f.runStep()
	f.checkAll(ids, "")
	var seen []string
	for _, in := range f.steps {
		if len(in.Inputs) > wire.MaxTurnInputs {
			t.Fatalf("step %s has %d inputs", in.Key(), len(in.Inputs))
		}
		for _, c := range in.Inputs {
			seen = append(seen, c.ID)
		}
	}
	if !slices.Equal(seen[1:], ids) {
		t.Fatalf("the steps saw %d inputs, not each steer once in order", len(seen)-1)
	}
	if len(f.steps) < floodN/wire.MaxTurnInputs {
		t.Fatalf("%d steps for %d steers", len(f.steps), floodN)
	}
}

// demoEvents is the registry a demo owner validates with.
var demoEvents = func() *wire.EventRegistry {
	reg := wire.DefaultEvents()
	if err := wire.RegisterEvent(reg, demo.EventSlept, func(struct {
		Duration string `json:"duration"`
	}) error {
		return nil
	}); err != nil {
		panic(err)
	}
	return reg
}()

// TestAppliedSetStaysBoundedWhilePaused: a paused session with a queued
// delivery applies 3,000 pause commands, each above that delivery; the
// applied set never keeps more than wire.MaxAppliedAbove of them (plus the
// one a commit adds before the deletes are reported): the rest are
// deleted from the inbox and forgotten. After resume the delivery starts
// its turn and the set empties.
func TestAppliedSetStaysBoundedWhilePaused(t *testing.T) {
	f := newFlood(t)
	f.auto = true
	ids := []string{f.recv("p0", runtime.KindPause, nil).ID}
	d := f.recv("d1", runtime.KindDeliver, text("after the pause"))
	for i := range 3 * floodN / 2 {
		ids = append(ids, f.recv(fmt.Sprintf("p%04d", i+1), runtime.KindPause, nil).ID)
	}
	most := 0
	for _, c := range f.commits {
		most = max(most, len(c.Snapshot.Applied.Above))
		if c.Snapshot.Applied.Next > d.Seq {
			t.Fatalf("Applied.Next %d passed the waiting delivery %d", c.Snapshot.Applied.Next, d.Seq)
		}
	}
	if most > wire.MaxAppliedAbove+1 {
		t.Fatalf("the applied set held %d sequences above the waiting delivery", most)
	}
	if len(f.deleted) < len(ids)-wire.MaxAppliedAbove-2 {
		t.Fatalf("%d applied commands deleted from the inbox", len(f.deleted))
	}
	for _, s := range f.deleted {
		if s <= d.Seq {
			t.Fatalf("deleted %d, at or below the waiting delivery %d", s, d.Seq)
		}
	}
	ids = append(ids, f.recv("resume", runtime.KindResume, nil).ID)
	f.checkAll(append(ids[:1], append([]string{d.ID}, ids[1:]...)...), d.ID)
	s := f.m.Snapshot()
	if s.Turn != nil || s.Turns != 1 || len(s.Applied.Above) != 0 {
		t.Fatalf("turns %d, turn %+v, above %v: the delivery did not run", s.Turns, s.Turn, s.Applied.Above)
	}
}

func eventKinds(evs []runtime.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}
