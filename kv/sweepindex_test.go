package kv_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
)

// The process registrations and the quarantine index: idempotent writes,
// listings by deployment (registrations) or of all (quarantine), removals
// that tolerate a missing key, and invalid IDs refused before any write.
func testSweepIndexes(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	dep, other := uid("dep"), uid("dep")
	for _, pid := range []string{"p1", "p2", "p1"} {
		if err := st.RegisterProcess(c, dep, pid); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.RegisterProcess(c, other, "p9"); err != nil {
		t.Fatal(err)
	}
	// A listing is a watcher on the bucket: on a loaded cluster it may
	// trail the writes briefly, so each expectation is polled with a
	// deadline (as the index's are).
	processes := func(want ...string) {
		t.Helper()
		eventually(t, func() error {
			if got, err := st.ListProcesses(c, dep); err != nil || !slices.Equal(got, want) {
				return fmt.Errorf("processes of %s: %v %v, want %v", dep, got, err, want)
			}
			return nil
		})
	}
	processes("p1", "p2")
	if err := st.UnregisterProcess(c, dep, "p1"); err != nil {
		t.Fatal(err)
	}
	if err := st.UnregisterProcess(c, dep, "p1"); err != nil {
		t.Fatalf("unregister twice: %v", err)
	}
	processes("p2")
	mustErr(t, st.RegisterProcess(c, "latest", "p1"), record.ErrInvalid)
	mustErr(t, st.RegisterProcess(c, dep, "a.b"), record.ErrInvalid)
	_, err := st.ListProcesses(c, "a.b")
	mustErr(t, err, record.ErrInvalid)

	s1, s2 := uid("s"), uid("s")
	for _, q := range []kv.Quarantined{{DeploymentID: dep, SessionID: s1}, {DeploymentID: other, SessionID: s2}, {DeploymentID: dep, SessionID: s1}} {
		if err := st.AddQuarantined(c, q.DeploymentID, q.SessionID); err != nil {
			t.Fatal(err)
		}
	}
	mine := func() []kv.Quarantined {
		t.Helper()
		all, err := st.ListQuarantined(c)
		if err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(all, func(q kv.Quarantined) bool { return q.SessionID != s1 && q.SessionID != s2 })
	}
	want := []kv.Quarantined{{DeploymentID: dep, SessionID: s1}, {DeploymentID: other, SessionID: s2}}
	if other < dep {
		want[0], want[1] = want[1], want[0]
	}
	quarantined := func(want []kv.Quarantined) {
		t.Helper()
		eventually(t, func() error {
			if got := mine(); !slices.Equal(got, want) {
				return fmt.Errorf("quarantined: %v, want %v", got, want)
			}
			return nil
		})
	}
	quarantined(want)
	if err := st.RemoveQuarantined(c, dep, s1); err != nil {
		t.Fatal(err)
	}
	if err := st.RemoveQuarantined(c, dep, s1); err != nil {
		t.Fatalf("remove twice: %v", err)
	}
	quarantined([]kv.Quarantined{{DeploymentID: other, SessionID: s2}})
	mustErr(t, st.AddQuarantined(c, dep, "a.b"), record.ErrInvalid)
	mustErr(t, st.AddQuarantined(c, "", s1), record.ErrInvalid)
}
