package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

// benchIndex: session_list_page — one page (limit 50) of the session
// index walked by a filter the key layout serves (state=active), and one
// with a filter applied at page time (a tenant's tag, walked, and
// state=active checked per entry), at 100,000 sessions (×-scale) created
// over 30 days; and session_count, the count of one deployment's active
// sessions. Each beside kv_get. The index part only: the ingress adds one
// record get per session on the page (16 at a time).
func benchIndex(ctx context.Context, e *env, r *bench.Reporter) error {
	names, err := subjects.New("bidx")
	if err != nil {
		return err
	}
	if _, err := topology.Ensure(ctx, e.js, topology.Config{Names: names}); err != nil {
		return err
	}
	x, err := kv.OpenIndex(ctx, e.js, names)
	if err != nil {
		return err
	}
	n := e.n(100_000)
	start := time.Now()
	if err := seedIndexBench(ctx, e, names, n); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench: index seeded with %d sessions in %s\n", n, time.Since(start).Round(time.Millisecond))
	pages := e.n(300)
	for _, c := range []struct {
		name string
		q    kv.IndexQuery
	}{
		{"session_list_page", kv.IndexQuery{State: "active"}},
		{"session_list_page_filtered", kv.IndexQuery{State: "active", Tags: map[string]string{"tenant": "t7"}}},
	} {
		samples := make([]time.Duration, 0, pages)
		got, after := 0, ""
		for i := range pages + 20 {
			t0 := time.Now()
			p, err := x.List(ctx, c.q, after, 50)
			if err != nil {
				return err
			}
			if i >= 20 { // warm-up
				samples = append(samples, time.Since(t0))
				got += len(p.Entries)
			}
			after = p.Next // walk on; start over at the end
		}
		r.Latencies(c.name, samples, 0, bench.Baseline("kv_get"), bench.Field("sessions", n),
			bench.Field("per_page", fmt.Sprintf("%.1f", float64(got)/float64(len(samples)))))
	}
	counts := make([]time.Duration, 0, e.n(100))
	for range e.n(100) {
		t0 := time.Now()
		if _, err := x.Count(ctx, subjects.DimDepState, subjects.DepState("dep-a", "active")); err != nil {
			return err
		}
		counts = append(counts, time.Since(t0))
	}
	r.Latencies("session_count", counts, 0, bench.Baseline("kv_get"), bench.Field("sessions", n))
	return nil
}

// seedIndexBench writes n entries and their postings straight to the
// index's stream (async publishes): 10 % active, 1 % paused, 1 %
// quarantined, 3 % ended, the rest hibernated; two deployments; a tenant
// tag of 100; 5 % waiting for input; created uniformly over 30 days.
func seedIndexBench(ctx context.Context, e *env, names subjects.Names, n int) error {
	prefix := subjects.KVSubject(names.IndexBucket(), "")
	rng := rand.New(rand.NewPCG(1, 2))
	now := time.Now().UTC()
	markers := map[string]bool{}
	for i := range n {
		ent := record.IndexEntry{SessionID: fmt.Sprintf("S%07d", i), Agent: "support", DeploymentID: "dep-a",
			State: record.StateHibernated, Epoch: 1, Revision: uint64(i + 1),
			CreatedAt: now.Add(-time.Duration(rng.Int64N(int64(30 * 24 * time.Hour)))),
			Tags:      map[string]string{"tenant": fmt.Sprintf("t%d", rng.IntN(100))}}
		switch k := rng.IntN(100); {
		case k < 10:
			ent.State = record.StateActive
		case k < 11:
			ent.State = record.StatePaused
		case k < 12:
			ent.State = record.StateQuarantined
		case k < 15:
			ent.State = record.StateEnded
		}
		if i%2 == 1 {
			ent.DeploymentID = "dep-b"
		}
		if rng.IntN(20) == 0 {
			ent.WaitingFor = []record.Wait{{Kind: record.WaitInput, RequestID: "r1"}}
		}
		data, err := json.Marshal(ent)
		if err != nil {
			return err
		}
		if err := publishAsync(e.js, prefix+subjects.IndexEntryKey(ent.SessionID), data); err != nil {
			return err
		}
		for _, p := range kv.Postings(ent) {
			if err := publishAsync(e.js, prefix+p.Key(), nil); err != nil {
				return err
			}
			if m := p.Marker(); !markers[m] {
				markers[m] = true
				if err := publishAsync(e.js, prefix+m, nil); err != nil {
					return err
				}
			}
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
		return nil
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("index seed not acknowledged")
	case <-ctx.Done():
		return ctx.Err()
	}
}
