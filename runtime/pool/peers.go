package pool

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/cenkalti/backoff/v4"
)

// peer is what the lease watch last showed of another owner process.
type peer struct {
	deployment string // from its last own lease ("" if never seen live)
	live       bool   // its own lease is live
	gen        uint64 // watch generation that confirmed it
	rev        uint64 // revision of the key's last change seen
}

// peerSet is the lease watch's view of every owner process, plus the
// processes this one is adopting right now.
type peerSet struct {
	mu       sync.Mutex
	m        map[string]peer
	gen      uint64
	adopting map[string]bool
}

// live reports whether pid's own lease is live as far as the current
// watch knows. It is a hint: adoption always goes through TakeoverLease,
// which fails on a live lease.
func (ps *peerSet) live(pid string) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.m[pid]
	return ok && p.live && p.gen == ps.gen
}

// adopter adopts the sessions of dead owner processes of this deployment:
// it follows every lease key (the peers' liveness, and this process's own
// key for the lease), takes a dead process's key over and wakes every
// session of its index through the pool, itself included (wake).
type adopter struct {
	cfg      *Config
	log      *slog.Logger
	peers    *peerSet
	lease    *lease
	reg      *registry
	wakes    *wakes
	draining *atomic.Bool
	drainCh  <-chan struct{}
	wake     func(context.Context, protocol.WakeRequest) protocol.WakeReply // Owner.Wake
}

// watchPeers follows every lease key. When the lease of a live process of
// this deployment expires, this process tries to take the dead key over
// (one peer wins) and adopt the dead process's sessions. The watch is
// restarted if it ends before ctx.
func (o *adopter) watchPeers(ctx context.Context) {
	for ctx.Err() == nil {
		ch, err := o.cfg.Store.WatchLeases(ctx)
		if err != nil {
			o.log.Warn("lease watch failed; retrying", "err", err)
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		o.peers.newWatch()
		for ev := range ch {
			o.peerEvent(ev)
		}
		sleep(ctx, 200*time.Millisecond)
	}
}

func (o *adopter) peerEvent(ev kv.LeaseEvent) {
	if ev.Err != nil {
		return
	}
	pid := ev.ProcessID
	if pid == o.cfg.ProcessID {
		o.lease.ownEvent(ev)
		return
	}
	wasLive, dep := o.peers.observe(ev)
	if ev.Expired && !ev.Initial && wasLive && dep == o.cfg.Deployment {
		o.log.Info("owner process lease expired", "dead", pid)
		ctx := o.reg.serving()
		o.reg.goBG(ctx, func() {
			if o.peers.changedSince(pid, ev.Revision) {
				return // a peer took the key over already (this watch lags)
			}
			o.adopt(ctx, pid, nil)
		})
	}
}

// newWatch starts a watch generation: a peer is live only as the current
// watch confirmed it.
func (ps *peerSet) newWatch() {
	ps.mu.Lock()
	ps.gen++
	ps.mu.Unlock()
}

// observe records what lease event ev shows of its process and reports
// whether that process was live before it, and its deployment then.
func (ps *peerSet) observe(ev kv.LeaseEvent) (wasLive bool, deployment string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	pid := ev.ProcessID
	prev, ok := ps.m[pid]
	wasLive = ok && prev.live && prev.gen == ps.gen
	next := peer{deployment: prev.deployment, gen: ps.gen, rev: ev.Revision}
	if !ev.Expired && ev.Lease.Holder == "" {
		next.deployment, next.live = ev.Lease.DeploymentID, true
	}
	ps.m[pid] = next
	return wasLive, prev.deployment
}

// shard is self's share of work split across the live processes of
// deployment dep: the peers the current watch shows live, and self (its
// own lease is followed apart, by the lease; a sweeper runs only while it
// serves). It returns self's rank among them (sorted by process ID) and
// their count.
func (ps *peerSet) shard(dep, self string) (rank, n int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	live := []string{self}
	for pid, p := range ps.m {
		if pid != self && p.live && p.gen == ps.gen && p.deployment == dep {
			live = append(live, pid)
		}
	}
	slices.Sort(live)
	return slices.Index(live, self), len(live)
}

// shardAll is shard across every live owner process of the fleet,
// whatever its deployment.
func (ps *peerSet) shardAll(self string) (rank, n int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	live := []string{self}
	for pid, p := range ps.m {
		if pid != self && p.live && p.gen == ps.gen {
			live = append(live, pid)
		}
	}
	slices.Sort(live)
	return slices.Index(live, self), len(live)
}

// changedSince reports whether the watch saw pid's key change after rev.
func (ps *peerSet) changedSince(pid string, rev uint64) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.m[pid].rev > rev
}

func (ps *peerSet) startAdopting(pid string) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.adopting == nil {
		ps.adopting = map[string]bool{}
	}
	if ps.adopting[pid] {
		return false
	}
	ps.adopting[pid] = true
	return true
}

func (ps *peerSet) doneAdopting(pid string) {
	ps.mu.Lock()
	delete(ps.adopting, pid)
	ps.mu.Unlock()
}

// adopt takes over the lease key of a dead owner process — a conditional
// write that only succeeds on an expired, released or missing lease, so the
// dead process can never renew it and exactly one peer adopts — then wakes
// every session of its index (and extra, sessions a sweep found naming it)
// through the deployment's wake queue group, which spreads the claims over
// the live peers. An index entry is removed once its wake succeeded; the
// key is held (renewed) until every wake succeeded, then released. If this
// process stops adopting half way, the hold expires and the sweeper of any
// peer adopts what is left.
func (o *adopter) adopt(ctx context.Context, dead string, extra []string) {
	if dead == o.cfg.ProcessID || dead == "" || o.draining.Load() || !o.peers.startAdopting(dead) {
		return
	}
	defer o.peers.doneAdopting(dead)
	began := time.Now()
	rev, err := o.cfg.Store.TakeoverLease(ctx, dead, o.cfg.ProcessID, o.cfg.LeaseTTL)
	var owned *record.OwnedError
	switch {
	case errors.As(err, &owned):
		o.log.Debug("lease of owner process not taken over: held", "dead", dead, "holder", owned.Owner)
		return
	case err != nil:
		o.log.Warn("take over lease failed", "dead", dead, "err", err)
		return
	}
	o.log.Info("took over the lease of a dead owner process", "dead", dead)
	h := &hold{o: o, dead: dead, rev: rev}
	hctx, stop := context.WithCancel(ctx)
	var hwg sync.WaitGroup
	hwg.Go(func() { h.renew(hctx, stop) })
	hwg.Go(func() {
		// A draining process takes no new work: it stops adopting at once
		// (its wakes would only be refused by itself, and the hold would
		// keep the dead process's own restart waiting); the hold expires
		// and a peer's sweeper adopts what is left.
		select {
		case <-o.drainCh:
			o.log.Info("draining: stopped adopting the sessions of a dead owner process", "dead", dead)
			stop()
		case <-hctx.Done():
		}
	})
	ids, err := listIndexOf(hctx, o.cfg, o.log, dead, func() bool { return true }) // the hold bounds it
	listed := err == nil || errors.Is(err, record.ErrNotFound)
	if !listed {
		// Keep the key until the hold expires: the sweeper adopts again.
		o.log.Warn("list index of dead owner process failed", "dead", dead, "err", err)
	}
	for _, id := range extra {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	done := o.wakeAll(hctx, dead, ids) && listed
	stop()
	hwg.Wait()
	if done && !h.lost {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		// Its index is adopted: the registration goes, while the key is
		// held (a restart under the same ID registers after the release).
		if err := o.cfg.Store.UnregisterProcess(rctx, o.cfg.Deployment, dead); err != nil {
			o.log.Debug("unregister the adopted process", "dead", dead, "err", err)
		}
		_ = o.cfg.Store.ReleaseLease(rctx, dead, h.rev)
		cancel()
	}
	o.log.Info("adopted the sessions of a dead owner process", "dead", dead, "sessions", len(ids),
		"complete", done, "took", time.Since(began).Round(time.Millisecond))
}

// hold is a taken-over lease key, renewed while its sessions are adopted.
type hold struct {
	o    *adopter
	dead string
	rev  uint64
	lost bool
}

func (h *hold) renew(ctx context.Context, stop context.CancelFunc) {
	l := kv.Lease{ProcessID: h.dead, Holder: h.o.cfg.ProcessID, TakenAt: time.Now().UTC()}
	for {
		sleep(ctx, h.o.cfg.LeaseRenew)
		if ctx.Err() != nil {
			return
		}
		rev, err := h.o.cfg.Store.RenewLease(ctx, l, h.rev, h.o.cfg.LeaseTTL)
		switch {
		case err == nil:
			h.rev = rev
		case errors.Is(err, record.ErrConflict):
			h.o.log.Warn("lost the taken-over lease; stopping adoption", "dead", h.dead)
			h.lost = true
			stop()
			return
		}
	}
}

// errWakeDeferred is a wake answered "deferred" (the quarantine backoff,
// or a claim in progress): tried again.
var errWakeDeferred = errors.New("pool: wake deferred (quarantine backoff or a claim in progress)")

// wakeParallel bounds the wakes one adoption has in flight; wakeGiveUp
// bounds the retries of one session's wake.
const (
	wakeParallel = 16
	wakeGiveUp   = 30 * time.Second
)

// wakeAll wakes every session, retrying each until it succeeds or ctx ends;
// it reports whether all succeeded.
func (o *adopter) wakeAll(ctx context.Context, dead string, ids []string) bool {
	var failed atomic.Int32
	started := eachBounded(ctx, ids, wakeParallel, func(id string) {
		if !o.wakeUntilDone(ctx, id, dead) {
			failed.Add(1)
		}
	})
	return started && failed.Load() == 0 && ctx.Err() == nil
}

func (o *adopter) wakeUntilDone(ctx context.Context, id, dead string) bool {
	// Bounded: a session that cannot be loaded (an unreadable checkpoint)
	// must not hold the dead key forever — its index entry stays, and the
	// sweeper tries again later.
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(50*time.Millisecond), backoff.WithMaxInterval(2*time.Second),
		backoff.WithMaxElapsedTime(wakeGiveUp)), ctx)
	attempt := 0
	err := backoff.Retry(func() error {
		req := protocol.WakeRequest{SessionID: id, From: dead, Source: protocol.WakeTakeover}
		var rep protocol.WakeReply
		var err error
		// Every other attempt wakes the session here: the queue group may
		// hand the request to a member that never answers (a frozen
		// process keeps its subscriptions until its connection times out).
		if attempt++; attempt%2 == 0 {
			rep = o.wake(ctx, req)
		} else {
			rep, err = o.wakes.requestWake(ctx, req)
		}
		if err == nil && rep.Error != nil {
			err = rep.Error
		}
		if err == nil && rep.Outcome == protocol.WakeDeferred {
			// Not claimed yet (its boot waits for the quarantine backoff, or
			// a claim is in progress that may still be deferred or fail):
			// the dead process's index entry stays until a claim, so a
			// sweep still finds the session if the deferring process dies.
			err = errWakeDeferred
		}
		if err != nil {
			o.log.Debug("wake failed; retrying", "session", id, "err", err)
			return err
		}
		o.log.Debug("woken", "session", id, "outcome", rep.Outcome, "by", rep.ProcessID)
		return nil
	}, b)
	if err != nil {
		o.log.Warn("gave up waking a session of a dead owner process", "dead", dead, "session", id, "err", err)
		return false
	}
	if err := o.cfg.Store.RemoveIndex(ctx, dead, id); err != nil {
		o.log.Warn("remove index entry of adopted session", "dead", dead, "session", id, "err", err)
	}
	return true
}
