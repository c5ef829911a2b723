package main

import (
	"context"
	"os"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/baton-rt/baton/internal/stages"
	"time"
)

// benchHandoff: an eligible delivery accepted by the other deployment is
// published → the successor's first step starts; the session ping-pongs
// between two in-process owner pools.
func benchHandoff(ctx context.Context, e *env, r *bench.Reporter) error {
	blue, err := newRigFor(ctx, e, "blue", "blue-1")
	if err != nil {
		return err
	}
	defer blue.close()
	green, err := newRigFor(ctx, e, "green", "green-1")
	if err != nil {
		return err
	}
	defer green.close()
	id, err := blue.startSession()
	if err != nil {
		return err
	}
	if _, err := blue.deliverAndWait(ctx, id); err != nil {
		return err
	}
	n := e.n(200)
	samples := make([]time.Duration, 0, n)
	var sizes recordSizes
	rigs := []*rig{green, blue}
	for i := range n + 4 {
		target := rigs[i%2]
		d, err := target.deliverFromAndWait(ctx, id, target.dep)
		if err != nil {
			return err
		}
		if i >= 4 {
			samples = append(samples, d)
		}
		if err := sizes.sample(ctx, e, id, i); err != nil {
			return err
		}
	}
	r.Latencies("handoff_latency", samples, 0, bench.Baseline("kv_cas_update"), bench.Field("record_bytes", sizes.mean()))
	stages.Report(os.Stderr, "handoff_latency")
	return floorHandoff(ctx, e, r, sizes.mean())
}
