package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/nats-io/nats.go/jetstream"
)

// benchHibernate: wake_to_step_start (a command to a hibernated session →
// its step begins, the wake sent as the ingress sends it) and sessions_held
// (sessions created and hibernated on one embedded server, with the live
// consumer count and the process's RSS).
func benchHibernate(ctx context.Context, e *env, r *bench.Reporter) error {
	if err := benchWake(ctx, e, r); err != nil {
		return err
	}
	return benchHeld(ctx, e, r)
}

func benchWake(ctx context.Context, e *env, r *bench.Reporter) error {
	rig, err := newRigFor(ctx, e, "hib", "hib-1", func(c *pool.Config) {
		c.HibernateAfter, c.TickInterval = 20*time.Millisecond, 10*time.Millisecond
		c.DrainTimeout = 10 * time.Second // closing hibernates what is loaded
	})
	if err != nil {
		return err
	}
	defer rig.close()
	n := e.n(100)
	samples := make([]time.Duration, 0, n)
	for range n {
		id, err := rig.startSession()
		if err != nil {
			return err
		}
		if err := rig.waitHibernated(ctx, id); err != nil {
			return err
		}
		cid := nextID()
		data, err := deliverCmdFrom(rig.dep, cid, "wake "+cid)
		if err != nil {
			return err
		}
		ch := rig.probe.expect(cid)
		t0 := time.Now()
		if _, err := e.js.Publish(ctx, rig.names.Inbox(id), data, jetstream.WithMsgID(cid)); err != nil {
			return err
		}
		wake, _ := json.Marshal(protocol.WakeRequest{SessionID: id, Source: protocol.WakeIngress})
		if err := e.nc.Publish(rig.names.Wake(rig.dep), wake); err != nil {
			return err
		}
		select {
		case t := <-ch:
			samples = append(samples, t.Sub(t0))
		case <-time.After(30 * time.Second):
			return fmt.Errorf("step of %s never started after its wake", id)
		}
	}
	r.Latencies("wake_to_step_start", samples, 0, bench.Baseline("consumer_create"))
	return nil
}

// waitHibernated polls the record until it says hibernated.
func (r *rig) waitHibernated(ctx context.Context, id string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		cur, err := r.store.LeaderSession(ctx, id)
		if err == nil && cur.Record.State == "hibernated" && !r.owner.IsLoaded(id) {
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	return fmt.Errorf("session %s never hibernated", id)
}

// benchHeld creates sessions as fast as 16 clients can and lets them
// hibernate under a cap of 1,000 loaded sessions: the figure is the start
// latency, with the peak of live inbox consumers and the RSS of this
// process (embedded server and owner together) once all are hibernated.
// Default 10,000 sessions; -scale 10 holds 100,000.
func benchHeld(ctx context.Context, e *env, r *bench.Reporter) error {
	const maxLoaded = 1000
	rig, err := newRigFor(ctx, e, "held", "held-1", func(c *pool.Config) {
		c.HibernateAfter, c.MaxLoaded = 100*time.Millisecond, maxLoaded
		c.TickInterval = 100 * time.Millisecond
	})
	if err != nil {
		return err
	}
	defer rig.close()
	stream, err := e.js.Stream(ctx, rig.names.InboxStream())
	if err != nil {
		return err
	}
	// Consumers left by earlier suites on this server (their rigs stop
	// without hibernating) are not this figure's: count from here.
	before, err := stream.Info(ctx)
	if err != nil {
		return err
	}
	others := before.State.Consumers
	var peak atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if info, err := stream.Info(ctx); err == nil && int64(info.State.Consumers-others) > peak.Load() {
				peak.Store(int64(info.State.Consumers - others))
			}
		}
	})
	n := e.n(10_000)
	samples := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	began := time.Now()
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				t0 := time.Now()
				if _, err := rig.startSession(); err != nil {
					errs <- err
					return
				}
				samples[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(began)
	close(errs)
	if err := <-errs; err != nil {
		close(stop)
		return err
	}
	// All hibernate once idle.
	deadline := time.Now().Add(2 * time.Minute)
	for len(rig.owner.Loaded()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	sampler.Wait()
	info, err := stream.Info(ctx)
	if err != nil {
		return err
	}
	r.Latencies("sessions_held", samples, elapsed, bench.Baseline("consumer_create"),
		bench.Field("sessions", n), bench.Field("loaded_now", len(rig.owner.Loaded())),
		bench.Field("consumers_now", info.State.Consumers-others), bench.Field("consumers_peak", peak.Load()),
		bench.Field("other_suites_consumers", others),
		bench.Field("max_loaded", maxLoaded), bench.Field("rss_mib", rssMiB()))
	return nil
}

// rssMiB reads this process's resident set size (Linux), or -1.
func rssMiB() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err == nil {
				return kb / 1024
			}
		}
	}
	return -1
}
