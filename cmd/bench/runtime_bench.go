package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/baton-rt/baton/internal/stages"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// stepStartConcurrency is the concurrent sessions of the second
// delivery-to-step-start figure, and the raw loops of its baseline.
const stepStartConcurrency = 100

// benchRuntime: delivery → step start at 1 and 100 concurrent sessions, and
// delivery throughput at 1,000 sessions against the raw write pattern.
func benchRuntime(ctx context.Context, e *env, r *bench.Reporter) error {
	rg, err := newRig(ctx, e)
	if err != nil {
		return err
	}
	defer rg.close()
	for _, n := range []int{1, stepStartConcurrency} {
		if err := benchStepStart(ctx, rg, r, n); err != nil {
			return err
		}
	}
	if err := benchJournalDo(ctx, rg, r); err != nil {
		return err
	}
	return benchThroughput(ctx, rg, r)
}

// benchJournalDo: one StepInput.Do of a function that returns at once — a
// create-only KV write of the call's entry — against a synchronous
// JetStream publish. Steps of 50 calls; the first step is warm-up.
func benchJournalDo(ctx context.Context, rg *rig, r *bench.Reporter) error {
	id, err := rg.startSession()
	if err != nil {
		return err
	}
	const calls = 50
	steps := max(rg.e.n(2000)/calls, 4)
	for i := range steps + 1 {
		if i == 1 {
			rg.probe.mu.Lock()
			rg.probe.journal = nil // the first step warmed up
			rg.probe.mu.Unlock()
		}
		if _, err := rg.deliverTextAndWait(ctx, id, fmt.Sprint("/journal ", calls)); err != nil {
			return err
		}
	}
	rg.probe.mu.Lock()
	samples := append([]time.Duration(nil), rg.probe.journal...)
	rg.probe.mu.Unlock()
	r.Latencies("journal_do", samples, 0, bench.Baseline("js_publish_sync"))
	return nil
}

func benchStepStart(ctx context.Context, rg *rig, r *bench.Reporter, sessions int) error {
	ids, err := rg.startSessions(sessions)
	if err != nil {
		return err
	}
	per := max(rg.e.n(2000)/sessions, 20)
	name := fmt.Sprintf("delivery_to_step_start_%d", sessions)
	stages.Reset()
	stopProfile, err := profileFigure(name)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var samples []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per + 5 {
				d, err := rg.deliverAndWait(ctx, id)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if i >= 5 { // warm-up
					samples = append(samples, d)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := stopProfile(); err != nil && firstErr == nil {
		firstErr = err
	}
	if firstErr != nil {
		return firstErr
	}
	// At 1 session the baseline is one raw loop; at more, as many raw
	// loops at once on the same server (js_publish_consume_rtt_<n>).
	base := "js_publish_consume_rtt"
	if sessions > 1 {
		base = fmt.Sprintf("js_publish_consume_rtt_%d", sessions)
	}
	size, err := recordBytes(ctx, rg.e, ids[0])
	if err != nil {
		return err
	}
	r.Latencies(name, samples, time.Since(start), bench.Baseline(base), bench.Field("sessions", sessions),
		bench.Field("record_bytes", size))
	stages.Report(os.Stderr, name) // a build with -tags batonstages only
	if sessions == 1 {
		return nil
	}
	return floorStepStart(ctx, rg.e, r, sessions, size)
}
