package pool

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/failpoint"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/wire"
)

// commitsAtStep is the demo agent that notes, at each session's first
// step in its process, how many commits that process had made for the
// session (counted by the AfterCommit failpoint).
type commitsAtStep struct {
	runtime.Agent
	commits sync.Map // session ID → *atomic.Int64
	mu      sync.Mutex
	first   map[string]int64
}

func (a *commitsAtStep) count(id string) *atomic.Int64 {
	n, _ := a.commits.LoadOrStore(id, new(atomic.Int64))
	return n.(*atomic.Int64)
}

func (a *commitsAtStep) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	a.mu.Lock()
	if _, ok := a.first[in.SessionID]; !ok {
		a.first[in.SessionID] = a.count(in.SessionID).Load()
	}
	a.mu.Unlock()
	return a.Agent.Step(ctx, in)
}

func (a *commitsAtStep) atFirstStep(id string) (int64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.first[id]
	return n, ok
}

// A handoff's successor admits its trigger in its boot commit: one commit
// before the trigger's step, where the boot and the admission took two —
// as they still do with TriggerWait negative. Either way the session
// records handoff.started, handoff.completed and the trigger's
// command.applied once each, in that order, and answers the trigger.
func TestHandoffSuccessorAdmitsTriggerInBootCommit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		wait    time.Duration
		commits int64
	}{
		{"merged", time.Minute, 1}, // the trigger is in the inbox: it comes
		{"boot alone", -1, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.owner("v1", "p1")
			succ := &commitsAtStep{first: map[string]int64{}}
			succ.Agent = &demo.Agent{Log: e.log, Process: "p2"}
			e.owner("v2", "p2", func(c *Config) {
				c.Agent, c.TriggerWait = succ, tt.wait
				c.Failpoints = failpoint.New().On(failpoint.AfterCommit, failpoint.Do(func(a failpoint.Args) {
					succ.count(a.SessionID).Add(1)
				}))
			})
			id := e.Start("v1").SessionID
			e.Send(id, stamped("a1", "v1", "hello v1"))
			e.WaitOutput(id, "hello v1")

			e.Send(id, stamped("t2", "v2", "hello v2"))
			evs := e.WaitOutput(id, "hello v2")
			n, ok := succ.atFirstStep(id)
			if !ok || n != tt.commits {
				t.Fatalf("the successor's commits before the trigger's step: %d (stepped %v), want %d", n, ok, tt.commits)
			}
			e.CheckStream(evs)
			handoffEvents(t, evs, "t2", wire.EventHandoffCompleted) // one each, in order
		})
	}
}
