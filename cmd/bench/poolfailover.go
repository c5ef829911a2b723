package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

// benchPoolFailover is failover_resume_pool (see benchPool).
func benchPoolFailover(ctx context.Context, e *env, r *bench.Reporter) error {
	const dep = "poolfo"
	n := e.n(1000)
	rigs, err := newRigs(ctx, e, dep, "poolfo", 3)
	defer func() { closeRigs(rigs) }()
	if err != nil {
		return err
	}
	clients, err := newPoolClients(e)
	if err != nil {
		return err
	}
	defer clients.close()
	ids, err := startLoaded(clients, rigs, n)
	if err != nil {
		return err
	}
	spread := loadedCounts(rigs, ids)
	if err := checkSpread(spread); err != nil {
		return err
	}
	// The victim: the first rig; its sessions are those it runs now.
	victim, survivors := rigs[0], rigs[1:]
	dead := loadedOn(victim, ids)
	crashed := crash(victim, len(dead))
	rigs = survivors // victim's connection is closed already
	waits, err := deliverAfterCrash(ctx, clients, dep, victim.names, survivors, dead)
	if err != nil {
		return err
	}
	samples, took, err := resumed(ctx, waits, crashed, survivors, dead)
	if err != nil {
		return err
	}
	r.Latencies("failover_resume_pool", samples, 0, bench.Baseline("js_publish_consume_rtt"),
		bench.Field("lease_ttl", pool.DefaultLeaseTTL), bench.Field("owners", 3),
		bench.Field("sessions", n), bench.Field("start_spread", joinInts(spread)),
		bench.Field("sessions_moved", len(samples)), bench.Field("spread", joinInts(took)),
		bench.Field("first_us", fmt.Sprintf("%.1f", float64(slices.Min(samples))/float64(time.Microsecond))),
		bench.Field("start_retries", clients.retries.Load()))
	if len(survivors) > 1 && min(took[0], took[1]) == 0 {
		fmt.Fprintf(os.Stderr, "bench: failover_resume_pool: every session of the crashed owner went to one survivor (%s)\n", joinInts(took))
	}
	return nil
}

// checkSpread fails unless the start queue group gave every owner a session.
func checkSpread(spread []int) error {
	for i, c := range spread {
		if c == 0 {
			return fmt.Errorf("start queue group did not spread: owner %d took none (%s)", i, joinInts(spread))
		}
	}
	return nil
}

// loadedOn is those of ids that rg runs now.
func loadedOn(rg *rig, ids []string) []string {
	var out []string
	for _, id := range ids {
		if rg.owner.IsLoaded(id) {
			out = append(out, id)
		}
	}
	return out
}

// crash kills victim, holding held sessions, as a SIGKILL would, at any
// phase of the renewal cycle (as failover.go): its connection is cut first
// (nothing more is written, the lease is not released and must expire),
// then its owner's Run is stopped. It returns when the connection was cut.
func crash(victim *rig, held int) time.Time {
	time.Sleep(rand.N(pool.DefaultLeaseTTL / 4))
	victim.nc.Close()
	crashed := time.Now()
	victim.cancel()
	<-victim.done
	if os.Getenv("BENCH_LOG") == "1" {
		fmt.Fprintf(os.Stderr, "bench: crashed poolfo-1 holding %d sessions at %s\n", held, crashed.UTC().Format(time.RFC3339Nano))
	}
	return crashed
}

// deliverAfterCrash publishes one delivery of deployment dep to each dead
// session from the clients; each channel tells which survivor started its
// step.
func deliverAfterCrash(ctx context.Context, clients *poolClientSet, dep string, names subjects.Names, survivors []*rig, dead []string) ([]<-chan started, error) {
	waits := make([]<-chan started, len(dead))
	err := clients.each(len(dead), func(client, i int) error {
		cid := nextID()
		data, err := deliverCmdFrom(dep, cid, "after crash "+cid)
		if err != nil {
			return err
		}
		waits[i] = expectAny(survivors, cid, 60*time.Second)
		_, err = clients.jss[client].Publish(ctx, names.Inbox(dead[i]), data, jetstream.WithMsgID(cid))
		return err
	})
	return waits, err
}

// resumed waits for each dead session's step on a survivor: per session,
// crash → step start, and per survivor how many it took. A session that
// never resumed fails.
func resumed(ctx context.Context, waits []<-chan started, crashed time.Time, survivors []*rig, dead []string) ([]time.Duration, []int, error) {
	samples := make([]time.Duration, 0, len(dead))
	took := make([]int, len(survivors))
	missing := 0
	for i, w := range waits {
		s := <-w
		if s.rig < 0 {
			missing++
			poolDiag(ctx, survivors[0], dead[i], survivors)
			continue
		}
		samples = append(samples, s.at.Sub(crashed))
		took[s.rig]++
	}
	if missing > 0 {
		return nil, nil, fmt.Errorf("%d of %d sessions of the crashed owner never resumed", missing, len(dead))
	}
	return samples, took, nil
}
