package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// poolClients is how many client connections publish concurrently (the
// "few concurrent clients" of a traffic switch, and of session creation).
const poolClients = 4

// benchPool: figures of owner pools holding many sessions.
//
//   - drain_1000: 1,000 idle sessions on deployment blue (two owner
//     processes); traffic switches to green (two owner processes): each
//     session gets a delivery accepted by green, published as the ingress
//     publishes it (inbox, then a wake to the session's deployment and to
//     the producer's). The figure is the whole switch: first publish → the
//     last session's green step started, with every record naming green.
//     drain_1000_per_session is each session's publish → green step start.
//   - failover_resume_pool: 1,000 sessions spread by the start queue group
//     over three owner processes of one deployment; one crashes (its NATS
//     connection cut, its lease left to expire, as a SIGKILL); each of its
//     sessions then gets a delivery; per session, crash → its step started
//     on a survivor.
func benchPool(ctx context.Context, e *env, r *bench.Reporter) error {
	if err := benchPoolDrain(ctx, e, r); err != nil {
		return fmt.Errorf("drain: %w", err)
	}
	if err := benchPoolFailover(ctx, e, r); err != nil {
		return fmt.Errorf("failover: %w", err)
	}
	return nil
}

// poolClientSet is a few client connections to publish from.
type poolClientSet struct {
	ncs     []*nats.Conn
	jss     []jetstream.JetStream
	retries atomic.Int64
}

func newPoolClients(e *env) (*poolClientSet, error) {
	c := &poolClientSet{}
	for range poolClients {
		nc, err := nats.Connect(e.url)
		if err != nil {
			c.close()
			return nil, err
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			c.close()
			return nil, err
		}
		c.ncs, c.jss = append(c.ncs, nc), append(c.jss, js)
	}
	return c, nil
}

func (c *poolClientSet) close() {
	for _, nc := range c.ncs {
		nc.Close()
	}
}

// each runs f(client, i) for i in [0, n) over the clients, each client a
// goroutine; it returns the first error.
func (c *poolClientSet) each(n int, f func(client, i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var first error
	var mu sync.Mutex
	for ci := range c.ncs {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(ci, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// startOn creates a session of deployment dep over the start subject (the
// deployment's queue group picks the owner).
// An "unavailable" answer (the owner fenced itself meanwhile) is retried, as
// a client would, a few times (counted in c.retries).
func (c *poolClientSet) startOn(client int, r *rig) (string, error) {
	for attempt := 0; ; attempt++ {
		msg, err := c.ncs[client].Request(r.names.Start(r.dep), []byte(`{"deploymentId":"`+r.dep+`"}`), 10*time.Second)
		if err != nil {
			return "", err
		}
		var rep protocol.StartReply
		if err := jsonUnmarshal(msg.Data, &rep); err != nil {
			return "", fmt.Errorf("start: %v", err)
		}
		if rep.Error == nil {
			return rep.SessionID, nil
		}
		if rep.Error.Code != protocol.CodeUnavailable || attempt == 5 {
			return "", fmt.Errorf("start: %v", rep.Error)
		}
		c.retries.Add(1)
		time.Sleep(200 * time.Millisecond)
	}
}

// startMany creates n sessions of r's deployment from the clients.
func (c *poolClientSet) startMany(n int, r *rig) ([]string, error) {
	ids := make([]string, n)
	err := c.each(n, func(client, i int) error {
		id, err := c.startOn(client, r)
		ids[i] = id
		return err
	})
	return ids, err
}

// expectAny registers command id with every rig's probe and returns a
// channel that gets the index of the rig whose step started first, and
// when.
type started struct {
	rig int
	at  time.Time
}

func expectAny(rigs []*rig, id string, timeout time.Duration) <-chan started {
	out := make(chan started, 1)
	chs := make([]chan time.Time, len(rigs))
	for i, rg := range rigs {
		chs[i] = rg.probe.expect(id)
	}
	go func() {
		t := time.NewTimer(timeout)
		defer t.Stop()
		// At most a handful of rigs: a select per pair is enough.
		agg := make(chan started, len(chs))
		done := make(chan struct{})
		defer close(done)
		for i, ch := range chs {
			go func() {
				select {
				case at := <-ch:
					agg <- started{i, at}
				case <-done:
				}
			}()
		}
		select {
		case s := <-agg:
			out <- s
		case <-t.C:
			out <- started{rig: -1}
		}
	}()
	return out
}

// loadedCounts is, per rig, how many of ids it runs now.
func loadedCounts(rigs []*rig, ids []string) []int {
	counts := make([]int, len(rigs))
	for _, id := range ids {
		for i, rg := range rigs {
			if rg.owner.IsLoaded(id) {
				counts[i]++
				break
			}
		}
	}
	return counts
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, "/")
}

// waitLoaded waits until every id runs on one of rigs.
func waitLoaded(rigs []*rig, ids []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		sum := 0
		for _, c := range loadedCounts(rigs, ids) {
			sum += c
		}
		if sum == len(ids) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d sessions loaded after %s", sum, len(ids), timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func closeRigs(rigs []*rig) {
	var wg sync.WaitGroup
	for _, rg := range rigs {
		wg.Go(rg.close)
	}
	wg.Wait()
}

func benchPoolDrain(ctx context.Context, e *env, r *bench.Reporter) error {
	const from, to = "blue", "green"
	n := e.n(1000)
	var blue, green []*rig
	defer func() { closeRigs(append(blue, green...)) }()
	for i := range 2 {
		rg, err := newRigFor(ctx, e, from, fmt.Sprintf("pool-%s-%d", from, i+1), poolLog)
		if err != nil {
			return err
		}
		blue = append(blue, rg)
	}
	for i := range 2 {
		rg, err := newRigFor(ctx, e, to, fmt.Sprintf("pool-%s-%d", to, i+1), poolLog)
		if err != nil {
			return err
		}
		green = append(green, rg)
	}
	clients, err := newPoolClients(e)
	if err != nil {
		return err
	}
	defer clients.close()
	ids, err := clients.startMany(n, blue[0])
	if err != nil {
		return err
	}
	if err := waitLoaded(blue, ids, 60*time.Second); err != nil {
		return err
	}
	blueSpread := loadedCounts(blue, ids)

	// The switch: every session gets a delivery accepted by green. A
	// handoff that ends Kept (the source runs the delivery itself, e.g. the
	// start request timed out) is retried by the next green delivery, as
	// traffic that switched would: up to three rounds.
	watch := append(append([]*rig{}, green...), blue...) // rig index < len(green): green
	first := make([]time.Time, n)
	samples := make([]time.Duration, 0, n)
	greenTook := make([]int, len(green))
	var last time.Time
	var published time.Duration
	kept, rounds := 0, 0
	pending := make([]int, n)
	for i := range pending {
		pending[i] = i
	}
	began := time.Now()
	for ; len(pending) > 0; rounds++ {
		if rounds == 3 {
			return fmt.Errorf("%d of %d sessions still on %s after %d rounds", len(pending), n, from, rounds)
		}
		waits := make([]<-chan started, len(pending))
		err = clients.each(len(pending), func(client, k int) error {
			i := pending[k]
			id := ids[i]
			cid := nextID()
			data, err := deliverCmdFrom(to, cid, "switch "+cid)
			if err != nil {
				return err
			}
			waits[k] = expectAny(watch, cid, 60*time.Second)
			if first[i].IsZero() {
				first[i] = time.Now()
			}
			if _, err := clients.jss[client].Publish(ctx, blue[0].names.Inbox(id), data, jetstream.WithMsgID(cid)); err != nil {
				return err
			}
			// As the ingress: wake the session's deployment and the producer's.
			wake, _ := json.Marshal(protocol.WakeRequest{SessionID: id, Source: protocol.WakeIngress})
			if err := clients.ncs[client].Publish(blue[0].names.Wake(from), wake); err != nil {
				return err
			}
			return clients.ncs[client].Publish(blue[0].names.Wake(to), wake)
		})
		if err != nil {
			return err
		}
		if rounds == 0 {
			published = time.Since(began)
		}
		var next []int
		missing := 0
		for k, w := range waits {
			i := pending[k]
			s := <-w
			switch {
			case s.rig < 0:
				missing++
				poolDiag(ctx, blue[0], ids[i], watch)
			case s.rig >= len(green):
				kept++
				next = append(next, i)
			default:
				samples = append(samples, s.at.Sub(first[i]))
				greenTook[s.rig]++
				if s.at.After(last) {
					last = s.at
				}
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d deliveries started no step in 60s", missing, len(pending))
		}
		pending = next
	}
	total := last.Sub(began)
	moved := 0
	for _, id := range ids {
		cur, err := blue[0].store.LeaderSession(ctx, id)
		if err == nil && cur.Record.DeploymentID == to {
			moved++
		}
	}
	if moved != n {
		return fmt.Errorf("only %d of %d records name %s after their green step started", moved, n, to)
	}
	r.Latencies("drain_1000", []time.Duration{total}, 0,
		bench.Field("sessions", n), bench.Field("sessions_moved", moved),
		bench.Field("blue_owners", len(blue)), bench.Field("green_owners", len(green)),
		bench.Field("blue_spread", joinInts(blueSpread)), bench.Field("green_spread", joinInts(greenTook)),
		bench.Field("clients", poolClients), bench.Field("publish_ms", published.Milliseconds()),
		bench.Field("kept", kept), bench.Field("rounds", rounds), bench.Field("start_retries", clients.retries.Load()))
	r.Latencies("drain_1000_per_session", samples, total, bench.Baseline("kv_cas_update"),
		bench.Field("sessions_moved", moved))
	return nil
}

func benchPoolFailover(ctx context.Context, e *env, r *bench.Reporter) error {
	const dep = "poolfo"
	n := e.n(1000)
	var rigs []*rig
	defer func() { closeRigs(rigs) }()
	for i := range 3 {
		rg, err := newRigFor(ctx, e, dep, fmt.Sprintf("poolfo-%d", i+1), poolLog)
		if err != nil {
			return err
		}
		rigs = append(rigs, rg)
	}
	clients, err := newPoolClients(e)
	if err != nil {
		return err
	}
	defer clients.close()
	ids, err := clients.startMany(n, rigs[0])
	if err != nil {
		return err
	}
	if err := waitLoaded(rigs, ids, 60*time.Second); err != nil {
		return err
	}
	spread := loadedCounts(rigs, ids)
	for i, c := range spread {
		if c == 0 {
			return fmt.Errorf("start queue group did not spread: owner %d took none (%s)", i, joinInts(spread))
		}
	}
	// The victim: the first rig; its sessions are those it runs now.
	victim := rigs[0]
	survivors := rigs[1:]
	var dead []string
	for _, id := range ids {
		if victim.owner.IsLoaded(id) {
			dead = append(dead, id)
		}
	}
	// A crash comes at any phase of the renewal cycle (as failover.go).
	time.Sleep(rand.N(pool.DefaultLeaseTTL / 4))
	// Crash: the connection is cut first (nothing more is written, the lease
	// is not released and must expire), then the owner's Run is stopped.
	victim.nc.Close()
	crashed := time.Now()
	victim.cancel()
	<-victim.done
	rigs = survivors // victim's connection is closed already
	if os.Getenv("BENCH_LOG") == "1" {
		fmt.Fprintf(os.Stderr, "bench: crashed poolfo-1 holding %d sessions at %s\n", len(dead), crashed.UTC().Format(time.RFC3339Nano))
	}
	waits := make([]<-chan started, len(dead))
	err = clients.each(len(dead), func(client, i int) error {
		cid := nextID()
		data, err := deliverCmdFrom(dep, cid, "after crash "+cid)
		if err != nil {
			return err
		}
		waits[i] = expectAny(survivors, cid, 60*time.Second)
		_, err = clients.jss[client].Publish(ctx, victim.names.Inbox(dead[i]), data, jetstream.WithMsgID(cid))
		return err
	})
	if err != nil {
		return err
	}
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
		return fmt.Errorf("%d of %d sessions of the crashed owner never resumed", missing, len(dead))
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

// poolDiag prints (BENCH_LOG=1) what the record of a session that did not
// run its step says, and which rig runs it.
func poolDiag(ctx context.Context, r *rig, id string, rigs []*rig) {
	if os.Getenv("BENCH_LOG") != "1" && os.Getenv("BENCH_POOL_LOG") == "" {
		return
	}
	cur, err := r.store.LeaderSession(ctx, id)
	var where []string
	for _, rg := range rigs {
		if rg.owner.IsLoaded(id) {
			where = append(where, rg.dep)
		}
	}
	rec := cur.Record
	fmt.Fprintf(os.Stderr, "bench: stuck %s err=%v dep=%s state=%s owner=%s epoch=%d handoff=%+v loaded_on=%v\n",
		id, err, rec.DeploymentID, rec.State, rec.OwnerProcess, rec.Epoch, rec.Handoff, where)
}

// poolLog: with BENCH_POOL_LOG=1 the pool's owners log warnings and errors
// only, with BENCH_POOL_LOG=info from level info (debug logging of 1,000 sessions slows the run enough to fence).
func poolLog(c *pool.Config) {
	switch os.Getenv("BENCH_POOL_LOG") {
	case "1":
		c.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	case "info":
		c.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
}
