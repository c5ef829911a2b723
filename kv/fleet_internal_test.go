package kv

import (
	"context"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/subjects"
)

// TestFleetRewatchKeepsThenPrunes: a watch started again applies its
// current state over the view as it was — what it holds stays visible
// throughout — and drops what it does not hold (gone while no watch ran).
func TestFleetRewatchKeepsThenPrunes(t *testing.T) {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := openInternal(t, c)
	if err := st.RegisterAgent(c, "v2", "shop"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Promote(c, "shop", "v2"); err != nil {
		t.Fatal(err)
	}
	first, stop := context.WithCancel(c)
	f, err := st.WatchFleet(first, nil)
	if err != nil {
		t.Fatal(err)
	}
	<-f.Loaded()
	stop() // the first watch ends; the view stays as it was
	f.mu.Lock()
	f.leases["ghost"] = liveLease{deployment: "v1"} // a lease that expired while no watch ran
	f.agents["gone"] = "shop"
	f.mu.Unlock()

	w, err := f.watch(c)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	loaded := make(chan struct{})
	watching, end := context.WithCancel(c)
	go func() { defer close(done); f.apply(watching, w, loaded) }()
	for {
		if dep, _, ok := f.Promoted("shop"); !ok || dep != "v2" || f.KnownAgent("v2") != "shop" {
			t.Fatalf("the view lost the promotion or an agent while a new watch loaded: %q %v %q", dep, ok, f.KnownAgent("v2"))
		}
		select {
		case <-loaded:
		default:
			time.Sleep(time.Millisecond)
			continue
		}
		break
	}
	if f.LiveOwners("v1") != 0 || f.KnownAgent("gone") != subjects.DefaultAgent {
		t.Fatalf("keys the new watch's state does not hold were kept: live v1 %d, agent of gone %q", f.LiveOwners("v1"), f.KnownAgent("gone"))
	}
	if dep, _, ok := f.Promoted("shop"); !ok || dep != "v2" {
		t.Fatalf("after the new watch loaded: promoted %q %v", dep, ok)
	}
	end()
	<-done
	stopWatch(w)
}

// openInternal opens a Store on a new embedded server with the topology
// (R1), for the package's internal tests.
func openInternal(t *testing.T, c context.Context) *Store {
	t.Helper()
	s := natstest.Server(t)
	_, js := natstest.Connect(t, s.ClientURL())
	if _, err := topology.Ensure(c, js, topology.Config{Replicas: 1}); err != nil {
		t.Fatal(err)
	}
	st, err := Open(c, js, subjects.Default())
	if err != nil {
		t.Fatal(err)
	}
	return st
}
