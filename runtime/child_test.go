package runtime_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"testing"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// cdriver drives one machine for the subagent examples: every commit lands
// at once, and what each call produced is returned as one list of effects.
type cdriver struct {
	t         *testing.T
	cfg       runtime.Config
	m         *runtime.Machine
	committed runtime.Snapshot
	run       *runtime.RunStep
	seq       uint64
}

func newCDriver(t *testing.T, session, dep string) *cdriver {
	t.Helper()
	d := &cdriver{t: t, cfg: runtime.Config{SessionID: session, RunID: "r1", Deployment: dep}}
	m, err := runtime.NewMachine(d.cfg, runtime.Snapshot{})
	if err != nil {
		t.Fatal(err)
	}
	d.m = m
	d.in(runtime.Boot{Now: epoch, Reason: runtime.BootNew})
	return d
}

// in feeds one input and lands every commit it leads to.
func (d *cdriver) in(in runtime.Input) []runtime.Effect {
	d.t.Helper()
	effs, err := d.m.Handle(in)
	if err != nil {
		d.t.Fatalf("Handle(%T): %v", in, err)
	}
	var out []runtime.Effect
	for len(effs) > 0 {
		e := effs[0]
		effs = effs[1:]
		out = append(out, e)
		switch e := e.(type) {
		case runtime.RunStep:
			d.run = &e
		case runtime.Commit:
			d.committed = e.Snapshot
			more, err := d.m.Handle(runtime.CommitDone{Outcome: runtime.CommitOK})
			if err != nil {
				d.t.Fatalf("CommitDone: %v", err)
			}
			effs = append(effs, more...)
		}
	}
	return out
}

// recv delivers c with the next sequence (and an ID derived from it).
func (d *cdriver) recv(c runtime.Command) []runtime.Effect {
	d.t.Helper()
	d.seq++
	c.Seq = d.seq
	if c.ID == "" {
		c.ID = "c" + strconv.FormatUint(d.seq, 10)
	}
	if c.Deployment == "" {
		c.Deployment = d.cfg.Deployment
	}
	return d.in(runtime.Received{Cmd: c})
}

func (d *cdriver) deliver(text string) []runtime.Effect {
	d.t.Helper()
	return d.recv(runtime.Command{Kind: runtime.KindDeliver, Text: text})
}

// step finishes the running step with r.
func (d *cdriver) step(r runtime.StepResult) []runtime.Effect {
	d.t.Helper()
	if d.run == nil {
		d.t.Fatal("no step running")
	}
	in := d.run.Input
	d.run = nil
	return d.in(runtime.StepDone{TurnID: in.TurnID, Step: in.Step, Result: r})
}

func (d *cdriver) handle(name string) runtime.Handle {
	d.t.Helper()
	for _, h := range d.m.Snapshot().Handles {
		if h.Handle == name {
			return h
		}
	}
	d.t.Fatalf("no handle %q in %+v", name, d.m.Snapshot().Handles)
	return runtime.Handle{}
}

// result is the child.result that answers h's active delegation.
func result(h runtime.Handle, outputs ...string) runtime.Command {
	return runtime.Command{Kind: runtime.KindChildResult, Child: &wire.ChildRef{
		Handle: h.Handle, SessionID: h.ChildSessionID, CommandID: h.CommandID, TurnID: "t1",
		Outcome: wire.ChildDone, Outputs: outputs,
	}}
}

func delegate(handle string, wait bool) *runtime.Delegate {
	return &runtime.Delegate{Handle: handle, Text: "do " + handle, Wait: wait}
}

func events(effs []runtime.Effect) []runtime.Event {
	var out []runtime.Event
	for _, e := range effs {
		if c, ok := e.(runtime.Commit); ok {
			out = append(out, c.Snapshot.Outbox...)
		}
	}
	return out
}

func eventsOf(effs []runtime.Effect, kind string) []map[string]any {
	var out []map[string]any
	for _, e := range events(effs) {
		if e.Kind == kind {
			var m map[string]any
			_ = json.Unmarshal(e.Data, &m)
			out = append(out, m)
		}
	}
	return out
}

// sendsOf are the SendCommands effects' sends (the commands that leave
// after their commit).
func sendsOf(effs []runtime.Effect) []runtime.Send {
	var out []runtime.Send
	for _, e := range effs {
		if s, ok := e.(runtime.SendCommands); ok {
			out = append(out, s.Sends...)
		}
	}
	return out
}

func sendsOfKind(effs []runtime.Effect, k runtime.Kind) []runtime.Send {
	return slices.DeleteFunc(sendsOf(effs), func(s runtime.Send) bool { return s.Command.Kind != k })
}

func runs(effs []runtime.Effect) []runtime.RunStep {
	var out []runtime.RunStep
	for _, e := range effs {
		if r, ok := e.(runtime.RunStep); ok {
			out = append(out, r)
		}
	}
	return out
}

func errorCode(t *testing.T, effs []runtime.Effect) string {
	t.Helper()
	errs := eventsOf(effs, runtime.EventError)
	if len(errs) != 1 {
		t.Fatalf("want one error event, got %v", errs)
	}
	code, _ := errs[0]["code"].(string)
	return code
}

// delegated returns a parent p whose first turn delegated to handle h with
// wait, and the effects of that step.
func delegated(t *testing.T, wait bool, outcome runtime.Outcome) (*cdriver, []runtime.Effect) {
	p := newCDriver(t, "p", "A")
	p.deliver("hi")
	return p, p.step(runtime.StepResult{Outcome: outcome, Delegate: delegate("h", wait)})
}

func TestDelegateWaitParksTurn(t *testing.T) {
	p, effs := delegated(t, true, runtime.OutcomeContinue)
	started := eventsOf(effs, runtime.EventChildStarted)
	h := p.handle("h")
	wantID := wire.ChildSessionID("p", "h", 1)
	if len(started) != 1 || started[0]["childSessionId"] != wantID || started[0]["deploymentId"] != "A" {
		t.Fatalf("child.started %v, want one for %s on A", started, wantID)
	}
	if h.State != wire.HandleActive || !h.Wait || h.Generation != 1 || h.ChildSessionID != wantID || h.TurnID != "t1" {
		t.Fatalf("handle %+v", h)
	}
	s := p.m.Snapshot()
	if s.Turn == nil || s.Turn.Open || len(runs(effs)) != 0 {
		t.Fatalf("turn not parked: %+v, runs %v", s.Turn, runs(effs))
	}
	if r := p.m.IdleReason(); r != runtime.SkipChild {
		t.Fatalf("IdleReason %q, want child", r)
	}
	// The deliver leaves after its commit, stamped by the parent.
	i := slices.IndexFunc(effs, func(e runtime.Effect) bool { _, ok := e.(runtime.SendCommands); return ok })
	c := slices.IndexFunc(effs, func(e runtime.Effect) bool { _, ok := e.(runtime.Commit); return ok })
	if i < 0 || c < 0 || i < c {
		t.Fatalf("SendCommands (%d) not after the commit (%d): %v", i, c, effs)
	}
	sends := sendsOf(effs)
	if len(sends) != 1 {
		t.Fatalf("sends %+v", sends)
	}
	sd := sends[0]
	cmd := sd.Command
	if sd.SessionID != wantID || sd.DeploymentID != "A" || sd.Alias != "child.p.h.1" {
		t.Fatalf("send target %+v", sd)
	}
	if cmd.Kind != runtime.KindDeliver || cmd.ParentSessionID != "p" || cmd.Handle != "h" || cmd.Depth != 1 || cmd.ID != h.CommandID {
		t.Fatalf("delegation %+v (handle commandId %q)", cmd, h.CommandID)
	}
	if len(cmd.Deliver.Payloads) != 1 || cmd.Deliver.Payloads[0].Message.Text != "do h" {
		t.Fatalf("delegation payloads %+v", cmd.Deliver.Payloads)
	}
	if !slices.EqualFunc(p.committed.Sends, sends, func(a, b runtime.Send) bool { return a.Command.ID == b.Command.ID }) {
		t.Fatalf("committed sends %+v", p.committed.Sends)
	}
}

func TestChildResultReopensWaitingTurn(t *testing.T) {
	p, _ := delegated(t, true, runtime.OutcomeContinue)
	h := p.handle("h")
	effs := p.recv(result(h, "42"))
	if got := p.handle("h"); got.State != wire.HandleParked || got.CommandID != "" || got.Wait {
		t.Fatalf("handle after result %+v", got)
	}
	done := eventsOf(effs, runtime.EventChildCompleted)
	if len(done) != 1 || done[0]["handle"] != "h" || done[0]["outcome"] != wire.ChildDone {
		t.Fatalf("child.completed %v", done)
	}
	rs := runs(effs)
	if len(rs) != 1 || rs[0].Input.Step != 2 || len(rs[0].Input.Inputs) != 1 {
		t.Fatalf("runs %+v", rs)
	}
	in := rs[0].Input.Inputs[0]
	if in.Kind != runtime.KindChildResult || in.Child == nil || in.Child.CommandID != h.CommandID || !slices.Equal(in.Child.Outputs, []string{"42"}) {
		t.Fatalf("next step's input %+v", in)
	}
	if r := p.m.IdleReason(); r == "" || r == runtime.SkipChild {
		t.Fatalf("IdleReason %q with a running step and no active handle", r)
	}
}

func TestChildResultStaleOrRepeated(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(runtime.Handle, *runtime.Command)
	}{
		{"wrong commandId", func(_ runtime.Handle, c *runtime.Command) { c.Child.CommandID = "p/t9/1/delegate" }},
		{"wrong handle", func(_ runtime.Handle, c *runtime.Command) { c.Child.Handle = "g" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _ := delegated(t, true, runtime.OutcomeContinue)
			h := p.handle("h")
			c := result(h)
			tc.edit(h, &c)
			effs := p.recv(c)
			if got := p.handle("h"); got != h {
				t.Fatalf("handle changed: %+v -> %+v", h, got)
			}
			if n := len(eventsOf(effs, runtime.EventChildCompleted)); n != 0 || len(runs(effs)) != 0 {
				t.Fatalf("stale result applied: %d child.completed, runs %v", n, runs(effs))
			}
			if s := p.m.Snapshot(); s.Turn == nil || s.Turn.Open {
				t.Fatalf("turn reopened: %+v", s.Turn)
			}
		})
	}
	t.Run("repeated", func(t *testing.T) {
		p, _ := delegated(t, false, runtime.OutcomeDone)
		h := p.handle("h")
		first := p.recv(result(h))
		again := p.recv(result(h)) // a new command ID: not deduplicated by the inbox
		if n := len(eventsOf(first, runtime.EventChildCompleted)); n != 1 {
			t.Fatalf("first result: %d child.completed", n)
		}
		if n := len(eventsOf(again, runtime.EventChildCompleted)); n != 0 {
			t.Fatalf("repeated result: %d child.completed", n)
		}
		if got := p.handle("h"); got.State != wire.HandleParked {
			t.Fatalf("handle %+v", got)
		}
	})
}

func TestCloseAndReuse(t *testing.T) {
	p, _ := delegated(t, false, runtime.OutcomeDone)
	h1 := p.handle("h")
	p.recv(result(h1))
	p.deliver("close it")
	effs := p.step(runtime.StepResult{Outcome: runtime.OutcomeDone, Close: []string{"h"}})
	ends := sendsOfKind(effs, runtime.KindEnd)
	if len(ends) != 1 || ends[0].SessionID != h1.ChildSessionID || ends[0].Command.ParentSessionID != "p" {
		t.Fatalf("end sends %+v", ends)
	}
	if c := eventsOf(effs, runtime.EventChildClosed); len(c) != 1 || c[0]["childSessionId"] != h1.ChildSessionID {
		t.Fatalf("child.closed %v", c)
	}
	if got := p.handle("h"); got.State != wire.HandleClosed {
		t.Fatalf("handle %+v", got)
	}
	p.deliver("again")
	effs = p.step(runtime.StepResult{Outcome: runtime.OutcomeDone, Delegate: delegate("h", false)})
	h2 := p.handle("h")
	if h2.Generation != 2 || h2.ChildSessionID == h1.ChildSessionID || h2.ChildSessionID != wire.ChildSessionID("p", "h", 2) {
		t.Fatalf("reused handle %+v (was %+v)", h2, h1)
	}
	ds := sendsOfKind(effs, runtime.KindDeliver)
	if len(ds) != 1 || ds[0].Alias != "child.p.h.2" || ds[0].SessionID != h2.ChildSessionID {
		t.Fatalf("delegation sends %+v", ds)
	}
	if n := len(eventsOf(effs, runtime.EventChildStarted)); n != 1 {
		t.Fatalf("%d child.started", n)
	}
	if n := len(p.m.Snapshot().Handles); n != 1 {
		t.Fatalf("%d handle entries for one name", n)
	}
}

func TestCloseUnknownHandle(t *testing.T) {
	p := newCDriver(t, "p", "A")
	p.deliver("x")
	if code := errorCode(t, p.step(runtime.StepResult{Outcome: runtime.OutcomeDone, Close: []string{"nope"}})); code != runtime.CodeHandleUnknown {
		t.Fatalf("code %q", code)
	}
}

func TestDelegateToParkedHandleContinues(t *testing.T) {
	p, _ := delegated(t, false, runtime.OutcomeDone)
	h := p.handle("h")
	p.recv(result(h))
	p.deliver("more")
	effs := p.step(runtime.StepResult{Outcome: runtime.OutcomeDone, Delegate: delegate("h", false)})
	ds := sendsOfKind(effs, runtime.KindDeliver)
	if len(ds) != 1 || ds[0].Alias != "" || ds[0].SessionID != h.ChildSessionID || len(eventsOf(effs, runtime.EventChildStarted)) != 0 {
		t.Fatalf("continuation sends %+v", ds)
	}
	if got := p.handle("h"); got.Generation != 1 || got.State != wire.HandleActive || got.CommandID != ds[0].Command.ID {
		t.Fatalf("handle %+v", got)
	}
}

func TestHandleLimit(t *testing.T) {
	p := newCDriver(t, "p", "A")
	p.deliver("fan out")
	for i := range wire.MaxHandles {
		effs := p.step(runtime.StepResult{Outcome: runtime.OutcomeContinue, Delegate: delegate("h"+strconv.Itoa(i), false)})
		if n := len(eventsOf(effs, runtime.EventError)); n != 0 {
			t.Fatalf("delegation %d failed", i+1)
		}
	}
	effs := p.step(runtime.StepResult{Outcome: runtime.OutcomeContinue, Delegate: delegate("one-too-many", false)})
	if code := errorCode(t, effs); code != runtime.CodeHandleLimit {
		t.Fatalf("code %q", code)
	}
	if n := len(p.m.Snapshot().Handles); n != wire.MaxHandles {
		t.Fatalf("%d handles", n)
	}
	if len(sendsOf(effs)) != 0 {
		t.Fatalf("a refused delegation sent %+v", sendsOf(effs))
	}
}

func TestDepthLimit(t *testing.T) {
	for _, tc := range []struct {
		depth int
		code  string
	}{{wire.MaxDepth - 1, ""}, {wire.MaxDepth, runtime.CodeDepthLimit}} {
		t.Run(strconv.Itoa(tc.depth), func(t *testing.T) {
			c := newCDriver(t, "c", "A")
			c.recv(runtime.Command{Kind: runtime.KindDeliver, Text: "go", Parent: &wire.ParentRef{SessionID: "gp", Handle: "x", Depth: tc.depth}})
			effs := c.step(runtime.StepResult{Outcome: runtime.OutcomeDone, Delegate: delegate("h", false)})
			if tc.code == "" {
				ds := sendsOfKind(effs, runtime.KindDeliver)
				if len(ds) != 1 || ds[0].Command.Depth != tc.depth+1 {
					t.Fatalf("delegation %+v", ds)
				}
				return
			}
			if code := errorCode(t, effs); code != tc.code {
				t.Fatalf("code %q", code)
			}
			if len(c.m.Snapshot().Handles) != 0 || len(sendsOfKind(effs, runtime.KindDeliver)) != 0 {
				t.Fatal("a refused delegation opened a handle")
			}
		})
	}
}

func TestHandleBusy(t *testing.T) {
	p, _ := delegated(t, false, runtime.OutcomeContinue)
	h := p.handle("h")
	effs := p.step(runtime.StepResult{Outcome: runtime.OutcomeDone, Delegate: delegate("h", false)})
	if code := errorCode(t, effs); code != runtime.CodeHandleBusy {
		t.Fatalf("code %q", code)
	}
	if got := p.handle("h"); got != h {
		t.Fatalf("handle changed %+v -> %+v", h, got)
	}
}

func TestCancelCascades(t *testing.T) {
	p, _ := delegated(t, true, runtime.OutcomeContinue)
	h := p.handle("h")
	effs := p.recv(runtime.Command{Kind: runtime.KindCancel})
	cs := sendsOfKind(effs, runtime.KindCancel)
	if len(cs) != 1 || cs[0].SessionID != h.ChildSessionID || cs[0].Command.Handle != "h" {
		t.Fatalf("cancel sends %+v", sendsOf(effs))
	}
	if got := p.handle("h"); got.State != wire.HandleActive || got.CommandID != h.CommandID {
		t.Fatalf("handle after cancel %+v", got)
	}
	if p.m.Snapshot().Turn != nil {
		t.Fatal("turn survives cancel")
	}
	if r := p.m.IdleReason(); r != runtime.SkipChild {
		t.Fatalf("IdleReason %q while the child still runs", r)
	}
	c := result(h)
	c.Child.Outcome = wire.ChildCancelled
	effs = p.recv(c)
	if got := p.handle("h"); got.State != wire.HandleParked {
		t.Fatalf("handle after the cancelled result %+v", got)
	}
	if len(runs(effs)) != 0 || p.m.IdleReason() != "" {
		t.Fatalf("after the result: runs %v, idle %q", runs(effs), p.m.IdleReason())
	}
}

func TestCancelSparesOtherTurnsChildren(t *testing.T) {
	p, _ := delegated(t, false, runtime.OutcomeDone) // t1's child, still active
	p.deliver("second")
	p.step(runtime.StepResult{Outcome: runtime.OutcomeContinue, Delegate: delegate("g", true)})
	effs := p.recv(runtime.Command{Kind: runtime.KindCancel})
	cs := sendsOfKind(effs, runtime.KindCancel)
	if len(cs) != 1 || cs[0].Command.Handle != "g" {
		t.Fatalf("cancel sends %+v", cs)
	}
}

func TestResetClearFinishCloseAll(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(p *cdriver) []runtime.Effect
	}{
		{"reset", func(p *cdriver) []runtime.Effect { return p.recv(runtime.Command{Kind: runtime.KindReset}) }},
		{"clear", func(p *cdriver) []runtime.Effect { return p.recv(runtime.Command{Kind: runtime.KindClear}) }},
		{"finish", func(p *cdriver) []runtime.Effect {
			p.deliver("bye")
			return p.step(runtime.StepResult{Outcome: runtime.OutcomeFinish})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newCDriver(t, "p", "A")
			p.deliver("x")
			p.step(runtime.StepResult{Outcome: runtime.OutcomeContinue, Delegate: delegate("a", false)})
			p.step(runtime.StepResult{Outcome: runtime.OutcomeDone, Delegate: delegate("b", false)})
			p.recv(result(p.handle("a"))) // a parked, b active
			effs := tc.end(p)
			ends := sendsOfKind(effs, runtime.KindEnd)
			got := []string{}
			for _, s := range ends {
				got = append(got, s.Command.Handle)
			}
			slices.Sort(got)
			if !slices.Equal(got, []string{"a", "b"}) {
				t.Fatalf("end sent to %v, want [a b]", got)
			}
			if n := len(eventsOf(effs, runtime.EventChildClosed)); n != 2 {
				t.Fatalf("%d child.closed", n)
			}
			for _, h := range p.m.Snapshot().Handles {
				if h.State != wire.HandleClosed {
					t.Fatalf("handle %+v open", h)
				}
			}
		})
	}
}

// The child side.

func childDelivery(text, dep string) runtime.Command {
	return runtime.Command{Kind: runtime.KindDeliver, Text: text, Deployment: dep, ID: "p/t1/1/delegate",
		Parent: &wire.ParentRef{SessionID: "p", Handle: "h", Depth: 1}}
}

func output(text string) runtime.Event {
	b, _ := json.Marshal(wire.MessageOutput{Text: text})
	return runtime.Event{Kind: runtime.EventMessageOutput, Data: b}
}

func TestChildTurnReportsResult(t *testing.T) {
	c := newCDriver(t, wire.ChildSessionID("p", "h", 1), "A")
	effs := c.recv(childDelivery("go", "A"))
	if len(runs(effs)) != 1 {
		t.Fatalf("no step: %v", effs)
	}
	if s := c.m.Snapshot(); s.Parent == nil || s.Parent.SessionID != "p" || s.Turn == nil || !s.Turn.Delegated {
		t.Fatalf("delegated turn not started: %+v %+v", s.Parent, s.Turn)
	}
	c.step(runtime.StepResult{Outcome: runtime.OutcomeContinue, Events: []runtime.Event{output("one")}})
	effs = c.step(runtime.StepResult{Outcome: runtime.OutcomeDone, Events: []runtime.Event{output("two")}, Usage: runtime.Usage{InputTokens: 3}})
	rs := sendsOfKind(effs, runtime.KindChildResult)
	if len(rs) != 1 || rs[0].SessionID != "p" {
		t.Fatalf("child.result sends %+v", sendsOf(effs))
	}
	r := rs[0].Command.ChildResult
	if r == nil || r.Handle != "h" || r.CommandID != "p/t1/1/delegate" || r.Outcome != wire.ChildDone ||
		!slices.Equal(r.Outputs, []string{"one", "two"}) || r.Usage.InputTokens != 3 || r.Ended != "" {
		t.Fatalf("child.result %+v", r)
	}
	// A plain delivery afterwards is not delegated: no second result.
	c.deliver("direct")
	if effs := c.step(runtime.StepResult{Outcome: runtime.OutcomeDone}); len(sendsOf(effs)) != 0 {
		t.Fatalf("an undelegated turn sent %+v", sendsOf(effs))
	}
}

func TestChildWaitingReported(t *testing.T) {
	c := newCDriver(t, "c", "A")
	c.recv(childDelivery("go", "A"))
	effs := c.step(runtime.StepResult{Outcome: runtime.OutcomeInput, RequestID: "q1", Question: "which?"})
	ws := sendsOfKind(effs, runtime.KindChildWaiting)
	if len(ws) != 1 || ws[0].SessionID != "p" {
		t.Fatalf("sends %+v", sendsOf(effs))
	}
	if w := ws[0].Command.ChildWaiting; w == nil || w.RequestID != "q1" || w.Question != "which?" || w.Handle != "h" || w.ChildSessionID != "c" {
		t.Fatalf("child.waiting %+v", ws[0].Command.ChildWaiting)
	}
	if n := len(sendsOfKind(effs, runtime.KindChildResult)); n != 0 {
		t.Fatalf("%d child.result while waiting", n)
	}
}

func TestChildEndCommand(t *testing.T) {
	c := newCDriver(t, "c", "A")
	c.recv(childDelivery("go", "A"))
	c.step(runtime.StepResult{Outcome: runtime.OutcomeInput, RequestID: "q1"})
	effs := c.recv(runtime.Command{Kind: runtime.KindEnd, Parent: &wire.ParentRef{SessionID: "p", Handle: "h", Depth: 1}})
	if c.m.Ended() != runtime.EndClosed {
		t.Fatalf("ended %q", c.m.Ended())
	}
	var ended []runtime.Event
	for _, e := range events(effs) {
		if e.Kind == runtime.EventSessionEnded {
			ended = append(ended, e)
		}
	}
	if len(ended) != 1 || ended[0].V != 3 || !json.Valid(ended[0].Data) || string(ended[0].Data) != `{"reason":"closed"}` {
		t.Fatalf("session.ended %+v", ended)
	}
	if n := len(sendsOfKind(effs, runtime.KindChildResult)); n != 0 {
		t.Fatalf("closed child sent %d child.result", n)
	}
}

func TestParentDeliveryNeverHandsOff(t *testing.T) {
	c := newCDriver(t, "c", "A")
	effs := c.recv(childDelivery("go", "B"))
	for _, e := range effs {
		if _, ok := e.(runtime.Handoff); ok {
			t.Fatal("a parent's delivery from another deployment triggered a handoff")
		}
	}
	if len(runs(effs)) != 1 {
		t.Fatalf("no delegated step: %v", effs)
	}
	// The same delivery without a parent is a trigger (the check has teeth).
	o := newCDriver(t, "o", "A")
	plain := childDelivery("go", "B")
	plain.Parent = nil
	if effs := o.recv(plain); len(effs) == 0 || !isHandoff(effs[0]) {
		t.Fatalf("a plain delivery from B did not trigger a handoff: %v", effs)
	}
}

// TestChildEventsRegistered: the events the machine records for subagents
// pass wire's default registry (the one readers validate with).
func TestChildEventsRegistered(t *testing.T) {
	for _, e := range []struct {
		kind string
		v    int
		data string
	}{
		{runtime.EventChildStarted, 1, `{"handle":"h","childSessionId":"C1","deploymentId":"A"}`},
		{runtime.EventChildCompleted, 1, `{"handle":"h","childSessionId":"C1","turnId":"t1","outcome":"done"}`},
		{runtime.EventChildWaiting, 1, `{"handle":"h","childSessionId":"C1","requestId":"q1"}`},
		{runtime.EventChildClosed, 1, `{"handle":"h","childSessionId":"C1"}`},
		{runtime.EventSessionEnded, 3, `{"reason":"closed"}`},
		{runtime.EventHandoffSkipped, 2, `{"reason":"child","commandId":"c1","seq":1,"deploymentId":"A","targetDeploymentId":"B"}`},
	} {
		if _, err := validWire(runtime.Event{Seq: 1, Kind: e.kind, V: e.v, Data: json.RawMessage(e.data)}); err != nil {
			t.Errorf("%s v%d: %v", e.kind, e.v, err)
		}
	}
}

// SendsDone commits the checkpoint without the last commit's sends (a
// session about to hibernate), and does nothing when there are none or
// while something is in flight; a boot then sends nothing again.
func TestSendsDoneClearsSends(t *testing.T) {
	p, _ := delegated(t, false, runtime.OutcomeDone)
	if len(p.committed.Sends) != 1 {
		t.Fatalf("committed sends %+v, want the delegation", p.committed.Sends)
	}
	effs := p.in(runtime.SendsDone{})
	if len(p.committed.Sends) != 0 || len(sendsOf(effs)) != 0 {
		t.Fatalf("after SendsDone: committed sends %+v, effects %v", p.committed.Sends, effs)
	}
	if effs := p.in(runtime.SendsDone{}); len(effs) != 0 {
		t.Fatalf("a second SendsDone did %v", effs)
	}
	if h := p.handle("h"); h.State != wire.HandleActive {
		t.Fatalf("handle %+v changed by SendsDone", h)
	}
	m, err := runtime.NewMachine(p.cfg, p.committed)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := m.Handle(runtime.Boot{Now: epoch, Reason: runtime.BootRecover})
	if err != nil || len(sendsOf(boot)) != 0 {
		t.Fatalf("boot after SendsDone sent %v (%v)", sendsOf(boot), err)
	}
}

// A delegation whose message the inbox cannot carry fails the step
// (delegate_invalid) for a parked handle as for a new one, and changes no
// handle.
func TestDelegateInvalidMessage(t *testing.T) {
	p, _ := delegated(t, false, runtime.OutcomeDone)
	p.recv(result(p.handle("h"), "ok"))
	before := p.handle("h")
	p.deliver("again")
	bad := &runtime.Delegate{Handle: "h", Payloads: []wire.Payload{{}}} // a payload that carries nothing
	effs := p.step(runtime.StepResult{Outcome: runtime.OutcomeDone, Delegate: bad})
	if code := errorCode(t, effs); code != runtime.CodeDelegateInvalid {
		t.Fatalf("code %q, want delegate_invalid", code)
	}
	if h := p.handle("h"); h != before || len(sendsOf(effs)) != 0 {
		t.Fatalf("handle %+v (was %+v), sends %v", h, before, sendsOf(effs))
	}
}
