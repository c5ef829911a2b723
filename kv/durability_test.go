package kv_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
)

// GetLease reads the lease with its instance nonce and revision from the
// leader; an expired or released lease is record.ErrNotFound.
func testGetLease(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	pid := uid("proc")
	_, _, err := st.GetLease(c, pid)
	mustErr(t, err, record.ErrNotFound)
	l := kv.Lease{ProcessID: pid, DeploymentID: "dep-a", Instance: "run-1"}
	rev, err := st.AcquireLease(c, l, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rev, err = st.RenewLease(c, l, rev, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got, grev, err := st.GetLease(c, pid)
	want := l
	want.TTL = 30 * time.Second // the write records its TTL
	if err != nil || grev != rev || got != want {
		t.Fatalf("get lease: %+v at %d (%v), want %+v at %d", got, grev, err, want, rev)
	}
	if err := st.ReleaseLease(c, pid, rev); err != nil {
		t.Fatal(err)
	}
	_, _, err = st.GetLease(c, pid)
	mustErr(t, err, record.ErrNotFound)
	_, _, err = st.GetLease(c, "a.b")
	mustErr(t, err, record.ErrInvalid)
}

// ListSessions lists live session records only.
func testListSessions(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	a, b := uid("s"), uid("s")
	ra, err := st.CreateSession(c, sessionRec(a, "run-a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateSession(c, sessionRec(b, "run-b")); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteSession(c, a, ra); err != nil {
		t.Fatal(err)
	}
	// A listing is a watcher on the bucket: on a loaded cluster it may trail
	// the writes briefly, so the expectation is polled with a deadline.
	eventually(t, func() error {
		ids, err := st.ListSessions(c)
		if err != nil {
			return err
		}
		if slices.Contains(ids, a) || !slices.Contains(ids, b) || !slices.IsSorted(ids) {
			return fmt.Errorf("list sessions: %v (deleted %s, live %s)", ids, a, b)
		}
		return nil
	})
}
