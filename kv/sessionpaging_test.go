package kv_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
)

// seedIndex writes n entries created a minute apart (newest: s0), half
// of deployment dep-b, every seventh quarantined, every fifth tagged
// tenant:acme, every third waiting for input.
func seedIndex(t *testing.T, x *kv.Index, n int) []record.IndexEntry {
	t.Helper()
	out := make([]record.IndexEntry, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var failed atomic.Value
	for i := range n {
		e := entry(fmt.Sprintf("s%06d", i), uint64(10+i), t0.Add(-time.Duration(i)*time.Minute))
		if i%2 == 0 {
			e.DeploymentID = "dep-b"
		}
		if i%7 == 0 {
			e.State = record.StateQuarantined
		}
		if i%5 == 0 {
			e.Tags = map[string]string{"tenant": "acme"}
		}
		if i%3 == 0 {
			e.WaitingFor = []record.Wait{{Kind: record.WaitInput, RequestID: "r"}}
		}
		out[i] = e
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := x.Put(context.Background(), e, false); err != nil {
				failed.Store(err)
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestIndexPagingUnderWriter pages through 1,000 sessions (100,000 under
// make soak) by several filters while a writer keeps moving a tenth of
// them between active and paused: every session that matches throughout
// the walk is listed exactly once, no session twice, newest first.
func TestIndexPagingUnderWriter(t *testing.T) {
	t.Parallel()
	x := openIndex(t)
	n := testsize.Pick(1000, 100000)
	seeded := seedIndex(t, x, n)
	// The writer: sessions i%10 == 1 flip between active and paused.
	ctx, stop := context.WithCancel(context.Background())
	var writes atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		rev := uint64(10 + n)
		for ctx.Err() == nil {
			i := 10*rand.IntN(n/10) + 1
			e := seeded[i]
			rev++
			e.Revision = rev
			if rev%2 == 0 {
				e.State = record.StatePaused
			}
			if _, err := x.Put(ctx, e, false); err != nil && ctx.Err() == nil {
				t.Errorf("writer: %v", err)
				return
			}
			writes.Add(1)
		}
	})
	defer func() { stop(); wg.Wait() }()
	unstable := func(i int) bool { return i%10 == 1 }
	for _, c := range []struct {
		name  string
		q     kv.IndexQuery
		match func(i int) bool
		limit int
	}{
		{"all", kv.IndexQuery{}, func(int) bool { return true }, 50},
		{"state active", kv.IndexQuery{State: "active"}, func(i int) bool { return i%7 != 0 }, 37},
		{"deployment and tag", kv.IndexQuery{Deployment: "dep-b", Tags: map[string]string{"tenant": "acme"}}, func(i int) bool { return i%10 == 0 }, 20},
		{"waiting and state", kv.IndexQuery{Waiting: "input", State: "quarantined"}, func(i int) bool { return i%21 == 0 }, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen := map[string]int{}
			var order []string
			after, pages := "", 0
			for {
				p, err := x.List(context.Background(), c.q, after, c.limit)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				for _, e := range p.Entries {
					seen[e.SessionID]++
					order = append(order, e.SessionID)
				}
				if p.Next == "" {
					break
				}
				after = p.Next
			}
			for id, k := range seen {
				if k > 1 {
					t.Fatalf("%s listed %d times", id, k)
				}
			}
			for i := 1; i < len(order); i++ {
				if order[i-1] >= order[i] { // s000000 is the newest
					t.Fatalf("out of order: %s before %s", order[i-1], order[i])
				}
			}
			missed := 0
			for i, e := range seeded {
				if c.match(i) && !unstable(i) && seen[e.SessionID] == 0 {
					missed++
				}
				if !c.match(i) && !unstable(i) && seen[e.SessionID] > 0 {
					t.Fatalf("%s listed, but it does not match", e.SessionID)
				}
			}
			if missed > 0 {
				t.Fatalf("%d stable matches missed", missed)
			}
			t.Logf("%d sessions in %d pages", len(order), pages)
		})
	}
	if writes.Load() == 0 {
		t.Fatal("the writer wrote nothing during the walks")
	}
	t.Logf("%d concurrent writes", writes.Load())
}
