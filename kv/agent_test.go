package kv_test

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

func testAgents(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	a1, a2, b1 := uid("a1"), uid("a2"), uid("b1")
	if got, err := st.AgentOf(c, a1); err != nil || got != subjects.DefaultAgent {
		t.Fatalf("agent of a deployment without a key = %q, %v; want default", got, err)
	}
	for _, d := range []string{a1, a2} {
		if err := st.RegisterAgent(c, d, "alpha"); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.RegisterAgent(c, a1, "alpha"); err != nil {
		t.Fatalf("registering the same agent again: %v", err)
	}
	err := st.RegisterAgent(c, a1, "beta")
	var mm *kv.AgentMismatchError
	if !errors.Is(err, kv.ErrAgentMismatch) || !errors.As(err, &mm) || mm.Agent != "alpha" || mm.Want != "beta" || mm.DeploymentID != a1 {
		t.Fatalf("another agent for %s: %v, want an AgentMismatchError alpha≠beta", a1, err)
	}
	if err := st.RegisterAgent(c, b1, "beta"); err != nil {
		t.Fatal(err)
	}
	if got, err := open(t, 1).AgentOf(c, a1); err != nil || got != "alpha" {
		t.Fatalf("agent of %s from another node = %q, %v", a1, got, err)
	}
	mustErr(t, st.RegisterAgent(c, a1, "Alpha"), record.ErrInvalid)
	mustErr(t, st.RegisterAgent(c, "latest", "alpha"), record.ErrInvalid)

	// Promotion: create, idempotent repeat, replace (previous), leader read.
	p, rev, err := st.Promote(c, "alpha", a1)
	if err != nil || p.DeploymentID != a1 || p.Previous != "" || rev == 0 {
		t.Fatalf("first promotion: %+v rev %d %v", p, rev, err)
	}
	again, rev2, err := st.Promote(c, "alpha", a1)
	if err != nil || rev2 != rev || again.DeploymentID != a1 {
		t.Fatalf("promoting the promoted deployment wrote: %+v rev %d→%d %v", again, rev, rev2, err)
	}
	p, rev3, err := st.Promote(c, "alpha", a2)
	if err != nil || p.DeploymentID != a2 || p.Previous != a1 || rev3 <= rev {
		t.Fatalf("second promotion: %+v rev %d %v", p, rev3, err)
	}
	got, grev, err := open(t, 2).Promoted(c, "alpha")
	if err != nil || got.DeploymentID != a2 || grev != rev3 {
		t.Fatalf("promoted read: %+v rev %d %v, want %s at %d", got, grev, err, a2, rev3)
	}
	if _, none, err := st.Promoted(c, "gamma"); err != nil || none != 0 {
		t.Fatalf("an agent never promoted: rev %d %v", none, err)
	}

	// Unretire keeps the other members; a second one changes nothing.
	if err := st.AdvertiseDeployment(c, b1, []int{1, 2}, []int{1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.RetireDeployment(c, b1); err != nil {
		t.Fatal(err)
	}
	d, changed, err := st.UnretireDeployment(c, b1)
	if err != nil || !changed || d.Retired || !d.RetiredAt.IsZero() || len(d.WireVersions) != 2 {
		t.Fatalf("unretire: %+v changed=%v %v", d, changed, err)
	}
	if retired, err := st.DeploymentRetired(c, b1); err != nil || retired {
		t.Fatalf("after unretire: retired=%v %v", retired, err)
	}
	if _, changed, err := st.UnretireDeployment(c, b1); err != nil || changed {
		t.Fatalf("unretire twice: changed=%v %v", changed, err)
	}
	if _, changed, err := st.UnretireDeployment(c, uid("never")); err != nil || changed {
		t.Fatalf("unretire of a deployment without a record: changed=%v %v", changed, err)
	}
}

// testFleet: the fleet view follows agents, promotions, retirements and
// live leases as they change.
func testFleet(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	f, err := open(t, 1).WatchFleet(c, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-f.Loaded():
	case <-time.After(30 * time.Second):
		t.Fatal("the fleet view did not load")
	}
	agent := uid("fa") // lower case, digits and '-': an agent name
	d1, d2 := uid("fd1"), uid("fd2")
	viewShows(t, f, "the agents of two new deployments", func() bool {
		return f.KnownAgent(d1) == agent && f.KnownAgent(d2) == agent
	}, func() {
		mustOK(t, st.RegisterAgent(c, d1, agent))
		mustOK(t, st.RegisterAgent(c, d2, agent))
	})
	_, rev, err := st.Promote(c, agent, d2)
	mustOK(t, err)
	viewShows(t, f, "the promotion", func() bool {
		dep, r, ok := f.Promoted(agent)
		return ok && dep == d2 && r == rev
	}, nil)
	_, _, err = st.RetireDeployment(c, d1)
	mustOK(t, err)
	viewShows(t, f, "the retirement", func() bool { return f.Retired(d1) && !f.Retired(d2) }, nil)
	pid := uid("proc")
	lrev, err := st.AcquireLease(c, kv.Lease{ProcessID: pid, DeploymentID: d2, Instance: "i"}, 30*time.Second)
	mustOK(t, err)
	viewShows(t, f, "a live owner", func() bool { return f.LiveOwners(d2) == 1 && f.LiveOwners(d1) == 0 }, nil)
	var view *kv.AgentView
	for _, v := range f.Agents() {
		if v.Agent == agent {
			view = &v
		}
	}
	if view == nil || view.Promoted != d2 || view.Revision != rev || len(view.Deployments) != 2 ||
		!view.Deployments[0].Retired || view.Deployments[1].OwnersLive != 1 {
		t.Fatalf("agents view of %s: %+v", agent, view)
	}
	mustOK(t, st.ReleaseLease(c, pid, lrev))
	viewShows(t, f, "the released lease", func() bool { return f.LiveOwners(d2) == 0 }, nil)
	// A deployment the view never saw is read from the leader: an agent
	// key written a moment ago is never taken for the default agent.
	d3 := uid("fd3")
	mustOK(t, st.RegisterAgent(c, d3, agent))
	if got, err := f.Agent(c, d3); err != nil || got != agent {
		t.Fatalf("agent of a just-registered deployment = %q, %v", got, err)
	}
	if got, err := f.Agent(c, uid("legacy")); err != nil || got != subjects.DefaultAgent {
		t.Fatalf("agent of a deployment without a key = %q, %v", got, err)
	}
}

// viewShows runs act, then waits on the view's changes until cond holds.
func viewShows(t *testing.T, f *kv.Fleet, what string, cond func() bool, act func()) {
	t.Helper()
	changed := f.Changed()
	if act != nil {
		act()
	}
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-changed:
			changed = f.Changed()
		case <-deadline:
			t.Fatalf("the fleet view never showed %s", what)
		}
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
