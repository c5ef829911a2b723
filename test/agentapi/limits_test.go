package agentapi_test

import (
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/wire"
)

// A turn that keeps asking for another step ends at --max-steps-per-turn:
// limit.reached {steps_per_turn, used, max}, then turn.completed with
// stopReason "limit"; the next turn runs normally. A turn whose tokens
// reach --max-tokens-per-turn ends after the step that reached it.
func TestTurnLimits(t *testing.T) {
	e := newEnv(t)
	e.owner("v1", "p1", func(c *pool.Config) { c.MaxStepsPerTurn, c.MaxTokensPerTurn = 4, 200 })
	id := e.create("v1")
	e.say("v1", id, "/loop")
	e.say("v1", id, "/tool capped")
	e.say("v1", id, "after")
	evs := e.turns(id, 3)
	got := limits(t, evs)
	if len(got) != 2 || got[0] != (wire.LimitReached{TurnID: "t1", Limit: wire.LimitStepsPerTurn, Used: 4, Max: 4}) ||
		got[1] != (wire.LimitReached{TurnID: "t2", Limit: wire.LimitTokensPerTurn, Used: 300, Max: 200}) {
		t.Fatalf("limit.reached %+v", got)
	}
	c := completed(t, evs)
	if c[0].StopReason != wire.StopLimit || c[1].StopReason != wire.StopLimit || c[2].StopReason != wire.StopDone {
		t.Fatalf("turn.completed %+v", c)
	}
	if n := harness.Count(evs, wire.EventTurnStep); n != 4+2+1 {
		t.Fatalf("%d steps committed, want 7", n)
	}
}

// The session's token budget: the step that reaches it ends its turn, and
// every later turn ends before its first step. The used counter travels in
// the checkpoint: after a handoff to a deployment with its own, smaller
// maximum, the successor shows the same usage and applies its maximum.
func TestSessionTokensAcrossHandoff(t *testing.T) {
	e := newEnv(t)
	e.owner("v1", "p1", func(c *pool.Config) { c.MaxTokensPerSession = 400 })
	e.owner("v2", "p2", func(c *pool.Config) { c.MaxTokensPerSession = 100 })
	id := e.create("v1")
	e.say("v1", id, "/tool one") // 300 tokens, under 400
	e.turns(id, 1)
	before := e.status(id)
	if !sameUsage(before.Usage, usage(250, 50, 80, 0.003)) {
		t.Fatalf("usage before the handoff %+v", before.Usage)
	}
	e.say("v2", id, "hello from v2") // the handoff trigger: v2 has 100 left of nothing
	evs := e.turns(id, 2)
	st := e.status(id)
	if st.DeploymentID != "v2" || harness.Count(evs, wire.EventHandoffCompleted) != 1 {
		t.Fatalf("not handed off: %+v", st)
	}
	if !sameUsage(st.Usage, before.Usage) {
		t.Fatalf("usage on the successor %+v, want %+v", st.Usage, before.Usage)
	}
	got := limits(t, evs)
	if len(got) != 1 || got[0] != (wire.LimitReached{TurnID: "t2", Limit: wire.LimitTokensPerSession, Used: 300, Max: 100}) {
		t.Fatalf("limit.reached %+v", got)
	}
	if c := completed(t, evs); c[1].StopReason != wire.StopLimit {
		t.Fatalf("turn.completed %+v", c)
	}
	if n := len(e.agent.seen(id)); n != 2 {
		t.Fatalf("%d steps ran, want 2 (no step after the budget)", n)
	}
}

// On its own deployment the budget ends the turn that reaches it.
func TestSessionTokenBudget(t *testing.T) {
	e := newEnv(t)
	e.owner("v1", "p1", func(c *pool.Config) { c.MaxTokensPerSession = 15 })
	id := e.create("v1")
	e.say("v1", id, "one")   // 10 tokens
	e.say("v1", id, "two")   // 20: reached after this step
	e.say("v1", id, "three") // no step
	evs := e.turns(id, 3)
	got := limits(t, evs)
	if len(got) != 2 || got[0] != (wire.LimitReached{TurnID: "t2", Limit: wire.LimitTokensPerSession, Used: 20, Max: 15}) ||
		got[1].TurnID != "t3" || got[1].Used != 20 {
		t.Fatalf("limit.reached %+v", got)
	}
	if n := len(e.agent.seen(id)); n != 2 {
		t.Fatalf("%d steps ran, want 2", n)
	}
}
