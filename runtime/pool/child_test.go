package pool

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// A waited delegation: the parent's /spawn creates one child on its own
// deployment (derived ID, parentSessionId), the child runs the text as its
// own delivery, its result comes back once and the handle parks.
func TestSpawnWaitsForChild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	e.owner("v1", "p1", func(c *Config) { c.Registerer = reg })
	id := e.Start("v1").SessionID
	e.Send(id, stamped("s1", "v1", "/spawn r hello"))
	evs := e.WaitOutput(id, "child r: hello")
	child := wire.ChildSessionID(id, "r", 1)
	cevs := e.WaitOutput(child, "hello")
	_, snap := e.session(id)
	if len(snap.Handles) != 1 || snap.Handles[0].State != wire.HandleParked || snap.Handles[0].ChildSessionID != child {
		t.Fatalf("handles %+v", snap.Handles)
	}
	_, csnap := e.session(child)
	if csnap.Parent == nil || csnap.Parent.SessionID != id || csnap.Parent.Handle != "r" || csnap.Parent.Depth != 1 {
		t.Fatalf("child parent %+v", csnap.Parent)
	}
	for _, k := range []string{wire.EventChildStarted, wire.EventChildCompleted} {
		if n := harness.Count(evs, k); n != 1 {
			t.Fatalf("%d %s events", n, k)
		}
	}
	e.CheckStream(evs)
	e.CheckStream(cevs)
	got := gather(t, reg)
	if got[`baton_owner_session_sends_total{kind="deliver",result="sent"}`] != 1 ||
		got[`baton_owner_session_sends_total{kind="child.result",result="sent"}`] != 1 {
		t.Fatalf("send metrics %v", got)
	}
}

// A session whose last commit sent something commits its checkpoint
// without those sends before it hibernates, so the wakes that boot it
// later do not send them again.
func TestHibernationClearsSends(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1", hibernating(200*time.Millisecond, 0))
	id := e.Start("v1").SessionID
	e.Send(id, stamped("s1", "v1", "/spawnbg r hello"))
	child := wire.ChildSessionID(id, "r", 1)
	e.WaitOutput(child, "hello")
	e.waitHibernated(id)
	e.waitHibernated(child)
	for _, sid := range []string{id, child} {
		if _, snap := e.session(sid); len(snap.Sends) != 0 {
			t.Fatalf("session %s hibernated with sends %+v", sid, snap.Sends)
		}
	}
	_, snap := e.session(id)
	if len(snap.Handles) != 1 || snap.Handles[0].State != wire.HandleParked {
		t.Fatalf("parent handles %+v", snap.Handles)
	}
}

// Delegating to a deployment that does not read the child commands (no
// deployment record, or one that advertises inbox version 1 only) is a
// failed step with code child_unsupported: no handle opens, nothing is
// sent, the session goes on.
func TestDelegateToOlderDeploymentUnsupported(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	if err := e.Store.AdvertiseDeployment(t.Context(), "old", []int{1}, []int{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	id := e.Start("v1").SessionID
	for i, dep := range []string{"old", "nosuch"} {
		cid := "s" + dep
		e.Send(id, stamped(cid, "v1", "/spawn r@"+dep+" hello"))
		errs := harness.AllData[wire.ErrorData](t, e.WaitKind(id, wire.EventErrorKind, i+1), wire.EventErrorKind)
		if d := errs[i]; d.Code != wire.CodeChildUnsupported || !strings.Contains(d.Message, dep) {
			t.Fatalf("error event %+v, want code child_unsupported naming %s", d, dep)
		}
	}
	e.Send(id, stamped("after", "v1", "after"))
	evs := e.WaitOutput(id, "after")
	if n := harness.Count(evs, wire.EventChildStarted); n != 0 {
		t.Fatalf("%d child.started", n)
	}
	if _, snap := e.session(id); len(snap.Handles) != 0 {
		t.Fatalf("handles %+v", snap.Handles)
	}
}

// A parent whose owner's deployment was retired is not adopted without
// force while its child works for it: an active handle is a live wait
// (no live wait crosses deployments silently).
func TestAdoptionRefusesActiveChild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p1 := e.owner("v1", "p1")
	e.owner("v1c", "pc")
	id := e.Start("v1").SessionID
	e.Send(id, stamped("s1", "v1", "/spawn r@v1c /sleep 20s"))
	kid := wire.ChildSessionID(id, "r", 1)
	e.Eventually(wait, "the child's sleep step running", func() bool { return slices.Contains(e.stepRuns(kid), "t1/1 pc") })
	if _, _, err := e.Store.RetireDeployment(t.Context(), "v1"); err != nil {
		t.Fatal(err)
	}
	_ = p1.Stop()
	o2 := e.owner("v2", "p2", hibernating(time.Hour, 0))
	cur := e.Record(id)
	if claimed, err := o2.adoptRetired(t.Context(), cur); claimed || !errors.Is(err, ErrWaitsPending) {
		t.Fatalf("adoption of a parent with an active child: claimed %v, err %v; want ErrWaitsPending", claimed, err)
	}
	if r := e.Record(id).Record; r.DeploymentID != "v1" {
		t.Fatalf("parent adopted by %s while its child works", r.DeploymentID)
	}
}
