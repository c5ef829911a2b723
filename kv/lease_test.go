package kv_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
)

// leaseSuite runs the lease tests in parallel with each other: they wait on
// TTLs, not on the CPU.
func leaseSuite(t *testing.T, open opener) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, opener)
	}{
		{"expires and is watched", testLeaseExpires},
		{"renewed lease survives", testLeaseRenewed},
		{"takeover after expiry", testLeaseTakeover},
		{"release", testLeaseRelease},
		{"validation", testLeaseValidation},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, open)
		})
	}
}

// watch starts a lease watcher through its own Store, stopped at cleanup.
func watch(t *testing.T, st *kv.Store) <-chan kv.LeaseEvent {
	t.Helper()
	c, cancel := context.WithCancel(context.Background())
	ch, err := st.WatchLeases(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		for range ch { // the channel closes once the watch stopped
		}
	})
	return ch
}

// waitExpired waits for pid's expiry event until deadline and returns when
// it arrived.
func waitExpired(t *testing.T, ch <-chan kv.LeaseEvent, pid string, deadline time.Time) time.Time {
	t.Helper()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatal("lease watch closed")
			}
			if ev.ProcessID == pid && ev.Expired {
				return time.Now()
			}
		case <-timer.C:
			t.Fatalf("no expiry of %s observed by %v", pid, deadline.Format(time.StampMilli))
		}
	}
}

// noExpiry fails if an expiry of pid is pending on ch.
func noExpiry(t *testing.T, ch <-chan kv.LeaseEvent, pid string) {
	t.Helper()
	for {
		select {
		case ev := <-ch:
			if ev.ProcessID == pid && ev.Expired {
				t.Fatalf("lease %s expired while renewed", pid)
			}
		default:
			return
		}
	}
}

func lease(pid string) kv.Lease { return kv.Lease{ProcessID: pid, DeploymentID: "dep-a"} }

func testLeaseExpires(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	ch := watch(t, open(t, 1))
	pid, ttl := uid("proc"), time.Second
	start := time.Now()
	if _, err := st.AcquireLease(c, lease(pid), ttl); err != nil {
		t.Fatal(err)
	}
	at := waitExpired(t, ch, pid, start.Add(ttl+time.Second))
	t.Logf("expiry observed after %v (TTL %v)", at.Sub(start).Round(time.Millisecond), ttl)
}

func testLeaseRenewed(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	ch := watch(t, open(t, 1))
	pid, ttl := uid("proc"), 2*time.Second
	l := lease(pid)
	rev, err := st.AcquireLease(c, l, ttl)
	if err != nil {
		t.Fatal(err)
	}
	last := time.Now()
	for end := last.Add(3 * ttl); time.Now().Before(end); {
		time.Sleep(ttl / 4) // the renewal cadence, not synchronisation
		if rev, err = st.RenewLease(c, l, rev, ttl); err != nil {
			t.Fatalf("renew after %v: %v", time.Since(last), err)
		}
		last = time.Now()
		noExpiry(t, ch, pid)
	}
	// The last renewal carried the TTL: the lease now expires on its own.
	at := waitExpired(t, ch, pid, last.Add(ttl+time.Second))
	if early := last.Add(ttl - 300*time.Millisecond); at.Before(early) {
		t.Fatalf("expired %v after the last renewal, TTL %v", at.Sub(last), ttl)
	}
	_, err = st.RenewLease(c, l, rev, ttl)
	mustErr(t, err, record.ErrConflict)
}

func testLeaseTakeover(t *testing.T, open opener) {
	st, adopter, c := open(t, 0), open(t, 2), ctx(t)
	ch := watch(t, open(t, 1))

	// A live lease cannot be taken over (a long TTL, so a stall of the
	// test cannot let it expire in between).
	live := uid("live")
	lrev, err := st.AcquireLease(c, lease(live), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = adopter.TakeoverLease(c, live, uid("taker"), time.Second)
	if oe := mustOwned(t, err); oe.Owner != live || oe.Revision != lrev {
		t.Fatalf("takeover of a live lease: %+v", oe)
	}
	if err := st.ReleaseLease(c, live, lrev); err != nil {
		t.Fatal(err)
	}

	pid, taker, ttl := uid("dead"), uid("taker"), time.Second
	l := lease(pid)
	start := time.Now()
	rev, err := st.AcquireLease(c, l, ttl)
	if err != nil {
		t.Fatal(err)
	}
	waitExpired(t, ch, pid, start.Add(ttl+time.Second))
	trev, err := adopter.TakeoverLease(c, pid, taker, 30*time.Second)
	if err != nil {
		t.Fatalf("takeover after expiry: %v", err)
	}
	// The dead holder can never renew, nor acquire its key again.
	_, err = st.RenewLease(c, l, rev, ttl)
	mustErr(t, err, record.ErrConflict)
	_, err = st.AcquireLease(c, l, ttl)
	if oe := mustOwned(t, err); oe.Owner != taker || oe.Revision != trev {
		t.Fatalf("acquire of a taken lease: %+v", oe)
	}
	_, err = st.TakeoverLease(c, pid, uid("late"), ttl)
	if oe := mustOwned(t, err); oe.Owner != taker {
		t.Fatalf("second takeover: %+v", oe)
	}
}

func testLeaseRelease(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	ch := watch(t, open(t, 1))
	pid, ttl := uid("proc"), 30*time.Second
	l := lease(pid)
	rev, err := st.AcquireLease(c, l, ttl)
	if err != nil {
		t.Fatal(err)
	}
	rev2, err := st.RenewLease(c, l, rev, ttl)
	if err != nil {
		t.Fatal(err)
	}
	mustErr(t, st.ReleaseLease(c, pid, rev), record.ErrConflict)
	start := time.Now()
	if err := st.ReleaseLease(c, pid, rev2); err != nil {
		t.Fatal(err)
	}
	waitExpired(t, ch, pid, start.Add(time.Second))
	_, err = st.RenewLease(c, l, rev2, ttl)
	mustErr(t, err, record.ErrConflict)
	if _, err := st.TakeoverLease(c, pid, uid("taker"), ttl); err != nil {
		t.Fatalf("takeover of a released lease: %v", err)
	}
}

func testLeaseValidation(t *testing.T, open opener) {
	st, c := open(t, 0), ctx(t)
	pid := uid("proc")
	for name, try := range map[string]func() error{
		"short ttl":      func() error { _, err := st.AcquireLease(c, lease(pid), 500*time.Millisecond); return err },
		"fractional ttl": func() error { _, err := st.AcquireLease(c, lease(pid), 1500*time.Millisecond); return err },
		"holder set": func() error {
			_, err := st.AcquireLease(c, kv.Lease{ProcessID: pid, DeploymentID: "d", Holder: "x"}, time.Second)
			return err
		},
		"no deployment": func() error { _, err := st.AcquireLease(c, kv.Lease{ProcessID: pid}, time.Second); return err },
		"bad process":   func() error { _, err := st.AcquireLease(c, lease("a.b"), time.Second); return err },
		"self takeover": func() error { _, err := st.TakeoverLease(c, pid, pid, time.Second); return err },
		"renew at 0":    func() error { _, err := st.RenewLease(c, lease(pid), 0, time.Second); return err },
		"release at 0":  func() error { return st.ReleaseLease(c, pid, 0) },
	} {
		if err := try(); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			mustErr(t, err, record.ErrInvalid)
		}
	}
}
