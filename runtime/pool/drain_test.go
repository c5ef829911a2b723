package pool

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// draining gives an owner a graceful drain on stop.
func draining(timeout time.Duration) func(*Config) {
	return func(c *Config) { c.DrainTimeout = timeout }
}

// A graceful drain: the process stops taking work, the running step
// finishes and commits (it does not run again elsewhere), every session
// hibernates, the lease is released and Run returns nil. A command sent
// during the drain and the sessions' next commands are applied once, by the
// pool's other process, loaded on demand by wakes.
func TestGracefulDrain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p1 := e.owner("v1", "p1", draining(20*time.Second), hibernating(time.Hour, 0))
	idle := e.Start("v1").SessionID
	busy := e.Start("v1").SessionID
	asking := e.Start("v1").SessionID
	e.Send(idle, harness.Deliver("hello"))
	e.WaitOutput(idle, "hello")
	e.Send(asking, harness.Deliver("/ask name?"))
	evs := e.WaitKind(asking, wire.EventInputRequested, 1)
	req := harness.FirstData[wire.InputRequested](t, evs, wire.EventInputRequested)
	e.Send(busy, harness.Deliver("/sleep 1500ms"))
	e.WaitKind(busy, wire.EventTurnStarted, 1)
	e.Eventually(wait, "the sleep step running", func() bool { return slices.ContainsFunc(e.execs(busy), func(s string) bool { return s != "" }) })
	p2 := e.owner("v1", "p2", hibernating(time.Hour, 0))

	stopped := make(chan error, 1)
	p1.Cancel()
	go func() { stopped <- p1.Stop() }()
	// A command during the drain, once the drain hibernated the idle
	// session (sent earlier, the still-loaded session would apply it on p1,
	// as it should): p1 takes no new work; p2 applies it.
	e.waitHibernated(idle)
	e.Send(idle, harness.Deliver("during"))
	e.Wake("v1", idle)
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Run after a drain: %v", err)
		}
	case <-time.After(wait):
		t.Fatal("drain did not finish")
	}
	for _, id := range []string{idle, busy, asking} {
		cur, _ := e.session(id)
		if cur.Record.OwnerProcess == "p1" && cur.Record.State != record.StateHibernated {
			t.Fatalf("session %s left on the drained process: %+v", id, cur.Record)
		}
	}
	// Released: gone, or already taken over by the peer adopting p1's
	// (empty) index.
	if l, _, err := e.Store.GetLease(t.Context(), "p1"); !errors.Is(err, record.ErrNotFound) && (err != nil || l.Holder != "p2") {
		t.Fatalf("lease of the drained process: %+v %v", l, err)
	}
	// The sleep step finished and committed on p1: it never runs again.
	e.WaitKind(busy, wire.EventTurnCompleted, 1)
	if keys := e.stepRuns(busy); len(keys) == 0 || keys[0] != "t1/1 p1" || hasDup(keys) {
		t.Fatalf("steps of the busy session: %v (want t1/1 on p1, each once)", keys)
	}
	e.WaitOutput(idle, "during")
	// Next commands: loaded by p2 on demand.
	e.Send(asking, harness.InputResponse(req.RequestID, `"ada"`))
	e.Wake("v1", asking)
	e.WaitOutput(asking, "input "+req.RequestID+`: "ada"`)
	e.Send(busy, harness.Deliver("after"))
	e.Wake("v1", busy)
	evs = e.WaitOutput(busy, "after")
	e.CheckStream(evs)
	for _, id := range []string{idle, busy, asking} {
		evs := e.Events(id)
		for cid, n := range countApplied(evs) {
			if n != 1 {
				t.Fatalf("session %s: %s applied %d times", id, cid, n)
			}
		}
		if cur, _ := e.session(id); cur.Record.OwnerProcess != "p2" {
			t.Fatalf("session %s not on p2 after its command: %+v", id, cur.Record)
		}
	}
	if st := p2.Stats(); st.Wakes[protocol.WakeIngress] == 0 {
		t.Fatalf("p2 stats %+v", st)
	}
}

// stepRuns lists "<stepKey> <process>" for each step run of a session.
func (e *env) stepRuns(id string) []string {
	var out []string
	for _, x := range e.log.Entries() {
		if x.SessionID == id {
			out = append(out, x.StepKey+" "+x.Process)
		}
	}
	return out
}

// hasDup reports whether a step key appears twice.
func hasDup(runs []string) bool {
	seen := map[string]bool{}
	for _, r := range runs {
		k, _, _ := strings.Cut(r, " ")
		if seen[k] {
			return true
		}
		seen[k] = true
	}
	return false
}
