package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
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

// newRigs runs count owners of deployment dep, processes name-1 … name-count.
// On an error it returns the rigs already running, for the caller to close.
func newRigs(ctx context.Context, e *env, dep, name string, count int) ([]*rig, error) {
	var rigs []*rig
	for i := range count {
		rg, err := newRigFor(ctx, e, dep, fmt.Sprintf("%s-%d", name, i+1), poolLog)
		if err != nil {
			return rigs, err
		}
		rigs = append(rigs, rg)
	}
	return rigs, nil
}

// startLoaded creates n sessions of rigs' deployment from the clients and
// waits until every one runs on one of rigs.
func startLoaded(clients *poolClientSet, rigs []*rig, n int) ([]string, error) {
	ids, err := clients.startMany(n, rigs[0])
	if err != nil {
		return nil, err
	}
	return ids, waitLoaded(rigs, ids, 60*time.Second)
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
