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
	consumers, err := sampleConsumers(ctx, stream)
	if err != nil {
		return err
	}
	n := e.n(10_000)
	samples, elapsed, err := startConcurrently(rig, n, 16)
	if err != nil {
		consumers.stop()
		return err
	}
	waitAllHibernated(rig, 2*time.Minute)
	peak := consumers.stop()
	info, err := stream.Info(ctx)
	if err != nil {
		return err
	}
	r.Latencies("sessions_held", samples, elapsed, bench.Baseline("consumer_create"),
		bench.Field("sessions", n), bench.Field("loaded_now", len(rig.owner.Loaded())),
		bench.Field("consumers_now", info.State.Consumers-consumers.others), bench.Field("consumers_peak", peak),
		bench.Field("other_suites_consumers", consumers.others),
		bench.Field("max_loaded", maxLoaded), bench.Field("rss_mib", rssMiB()))
	return nil
}

// consumerSampler reads a stream's consumer count every 50ms in the
// background, keeping the peak of those above others.
type consumerSampler struct {
	others int // consumers already there when sampling began
	peak   atomic.Int64
	quit   chan struct{}
	wg     sync.WaitGroup
}

// sampleConsumers starts sampling stream. Consumers left by earlier suites
// on this server (their rigs stop without hibernating) are not this
// figure's: it counts from the consumers there now.
func sampleConsumers(ctx context.Context, stream jetstream.Stream) (*consumerSampler, error) {
	before, err := stream.Info(ctx)
	if err != nil {
		return nil, err
	}
	s := &consumerSampler{others: before.State.Consumers, quit: make(chan struct{})}
	s.wg.Go(func() {
		for {
			select {
			case <-s.quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if info, err := stream.Info(ctx); err == nil && int64(info.State.Consumers-s.others) > s.peak.Load() {
				s.peak.Store(int64(info.State.Consumers - s.others))
			}
		}
	})
	return s, nil
}

// stop ends the sampling and returns the peak.
func (s *consumerSampler) stop() int64 {
	close(s.quit)
	s.wg.Wait()
	return s.peak.Load()
}

// startConcurrently starts n sessions on rig from the given number of
// clients, each a goroutine: each start's latency, the time all took, and
// the first error.
func startConcurrently(rig *rig, n, clients int) ([]time.Duration, time.Duration, error) {
	samples := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	began := time.Now()
	for range clients {
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
	return samples, elapsed, <-errs
}

// waitAllHibernated waits, up to timeout, until rig's owner has no session
// loaded: all hibernate once idle.
func waitAllHibernated(rig *rig, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for len(rig.owner.Loaded()) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
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
