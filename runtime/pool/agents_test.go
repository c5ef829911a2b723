package pool

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

func agentName(name string) func(*Config) { return func(c *Config) { c.AgentName = name } }

// A handoff trigger stamped by another agent's deployment is refused:
// command.rejected {agent_mismatch} instead of command.applied, no
// handoff, the session stays — a delivery and a move alike, even with a
// live owner of the other agent's deployment ready to take it. The same
// trigger from a deployment of the session's own agent moves it.
func TestTriggerFromAnotherAgentRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("a1", "pa1", agentName("alpha"))
	e.owner("b1", "pb1", agentName("beta"))
	id := e.Start("a1").SessionID
	e.Send(id, withDep("a1", harness.Deliver("hello")))
	e.WaitOutput(id, "hello")

	cross := withDep("b1", harness.Deliver("cross"))
	e.Send(id, cross)
	move := withDep("a1", harness.Move("b1"))
	e.Send(id, move)
	evs := e.WaitKind(id, wire.EventCommandRejected, 2)
	rejected := harness.AllData[wire.CommandRejected](t, evs, wire.EventCommandRejected)
	if rejected[0].Reason != wire.RejectAgentMismatch || rejected[1].Reason != wire.RejectAgentMismatch {
		t.Fatalf("rejections %+v, want reason %s", rejected, wire.RejectAgentMismatch)
	}
	for _, ev := range evs {
		if strings.HasPrefix(ev.Kind, "handoff.") {
			t.Fatalf("a trigger of another agent started a handoff: %s %s", ev.Kind, ev.Data)
		}
	}
	for _, a := range harness.AllData[wire.CommandApplied](t, evs, wire.EventCommandApplied) {
		if a.CommandID == rejected[0].CommandID || a.CommandID == rejected[1].CommandID {
			t.Fatalf("a refused command was also applied: %+v", a)
		}
	}
	if got := e.Record(id).Record.DeploymentID; got != "a1" {
		t.Fatalf("the session moved to %s", got)
	}

	// Same agent: the ordinary handoff.
	e.owner("a2", "pa2", agentName("alpha"))
	e.Send(id, withDep("a2", harness.Deliver("same agent")))
	e.WaitOutput(id, "same agent")
	if got := e.Record(id).Record.DeploymentID; got != "a2" {
		t.Fatalf("a trigger of the session's own agent left it on %s", got)
	}
}

// An owner refuses to start for a retired deployment (naming the un-retire
// route) and for a deployment of another agent; once un-retired it starts.
func TestOwnerStartRefusals(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	run := func(dep, agent string) error {
		p := e.Peer(e.Env)
		o, err := New(Config{NC: p.NC, JS: p.JS, Store: p.Store, Names: p.Names, Deployment: dep, AgentName: agent,
			ProcessID: "p-" + dep, Agent: &demo.Agent{Log: e.log}, Log: e.Logger(0)})
		e.Check(err)
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return o.Run(c)
	}
	if _, _, err := e.Store.RetireDeployment(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	err := run("r1", "")
	if !errors.Is(err, ErrRetired) || !strings.Contains(err.Error(), "/v1/admin/deployments/r1/unretire") {
		t.Fatalf("owner of a retired deployment: %v", err)
	}
	if err := e.Store.RegisterAgent(ctx, "m1", "alpha"); err != nil {
		t.Fatal(err)
	}
	if err := run("m1", "beta"); !errors.Is(err, kv.ErrAgentMismatch) {
		t.Fatalf("owner of another agent's deployment: %v", err)
	}
	if _, _, err := e.Store.UnretireDeployment(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	e.owner("r1", "pr1")
	if a, err := e.Store.AgentOf(ctx, "r1"); err != nil || a != subjects.DefaultAgent {
		t.Fatalf("agent of r1 = %q, %v", a, err)
	}
}

// A session whose deployment has no live owner left (not retired) is
// adopted at its next message by an owner of its agent's promoted
// deployment.
func TestPromotedAdoptsOwnerless(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p1 := e.owner("v1", "p1")
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("hello"))
	e.WaitOutput(id, "hello")
	e.Check(p1.Stop())
	e.owner("v2", "p2")
	if _, _, err := e.Store.Promote(t.Context(), subjects.DefaultAgent, "v2"); err != nil {
		t.Fatal(err)
	}
	e.Send(id, withDep("v2", harness.Deliver("after the promotion")))
	e.Wake("v2", id)
	evs := e.WaitOutput(id, "after the promotion")
	if got := e.Record(id).Record.DeploymentID; got != "v2" {
		t.Fatalf("session on %s", got)
	}
	if n := len(harness.AllData[wire.HandoffCompleted](t, evs, wire.EventHandoffCompleted)); n != 1 {
		t.Fatalf("%d handoff.completed, want the one adoption", n)
	}
}
