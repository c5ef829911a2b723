package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
)

// leaseState is this process's own lease: baton_owners/lease.<processID>.
//
// The lease is held while the monotonic clock is before validUntil: the
// time the last successful renewal (or the acquisition) was *sent* plus
// TTL − TTL/4. The server expires the lease no earlier than TTL after it
// received that write, so the process stops a quarter of the TTL before any
// peer can take its sessions over. Every session checks leaseValid before
// each effect (commit, publish, step...), so a process that was frozen
// (SIGSTOP) past its lease does nothing once it runs again, even before its
// renewal loop noticed.
//
// Past that deadline the process is *paused*, not yet fenced: no session
// performs an effect (each waits in awaitLease), but the sessions stay
// loaded while the renewal loop keeps trying. A renewal that lands at the
// revision this run last wrote (or read back as its own) proves that no
// peer took the lease over meanwhile — a takeover and the server's expiry
// both move the revision — so the sessions go on where they stood. A
// renewal the store refuses (expired, taken over) fences the process.
type leaseState struct {
	mu         sync.Mutex
	rev        uint64 // revision of this run's last lease write
	held       bool   // acquired and not released
	fenced     bool   // fenced since the last lease write
	cancel     context.CancelCauseFunc
	renewed    chan struct{} // closed and replaced at each lease write
	validUntil atomic.Int64  // nanoseconds since Owner.born; 0 = not held
}

func (o *Owner) leaseValue() kv.Lease {
	return kv.Lease{ProcessID: o.cfg.ProcessID, DeploymentID: o.cfg.Deployment, Instance: o.instance}
}

// leaseValid reports whether this process may act for its sessions now.
func (o *Owner) leaseValid() bool {
	return int64(time.Since(o.born)) < o.lease.validUntil.Load()
}

// setLease records a successful lease write sent at sent, and wakes the
// sessions waiting in awaitLease.
func (o *Owner) setLease(rev uint64, sent time.Time) {
	o.lease.validUntil.Store(int64(sent.Add(o.cfg.fenceAfter()).Sub(o.born)))
	o.lease.mu.Lock()
	o.lease.rev, o.lease.held, o.lease.fenced = rev, true, false
	if o.lease.renewed != nil {
		close(o.lease.renewed)
	}
	o.lease.renewed = make(chan struct{})
	o.lease.mu.Unlock()
}

// awaitLease returns at once while the lease is valid. While the process is
// paused (its renewal overdue) it waits for the renewal to land, and
// returns ErrFenced if the process fences instead, or ctx's error if ctx
// ends. The serving context of every session ends at a fence, so a session
// passes its own context.
func (o *Owner) awaitLease(ctx context.Context) error {
	for {
		o.lease.mu.Lock()
		renewed := o.lease.renewed
		o.lease.mu.Unlock()
		if o.leaseValid() {
			return nil
		}
		if renewed == nil {
			return ErrFenced // never acquired
		}
		select {
		case <-renewed:
		case <-ctx.Done():
		}
		// ctx first once woken: a session whose lease period ended while it
		// waited must not go on because a later period's lease is valid.
		if ctx.Err() != nil {
			if cause := context.Cause(ctx); errors.Is(cause, ErrFenced) {
				return cause
			}
			return ctx.Err()
		}
	}
}

// leaseHeld reports whether this run holds its lease, valid or paused:
// acquired, and neither fenced nor released since.
func (o *Owner) leaseHeld() bool {
	o.lease.mu.Lock()
	defer o.lease.mu.Unlock()
	return o.lease.held && !o.lease.fenced
}

func (o *Owner) leaseRev() uint64 {
	o.lease.mu.Lock()
	defer o.lease.mu.Unlock()
	return o.lease.rev
}

func (o *Owner) invalidate() { o.lease.validUntil.Store(0) }

func (ls *leaseState) setCancel(c context.CancelCauseFunc) {
	ls.mu.Lock()
	ls.cancel = c
	ls.mu.Unlock()
}

// fence stops the current lease period: every session stops at once (no
// further commit, publish or step), requests are no longer served, and Run
// acquires the lease again.
func (o *Owner) fence(cause error) {
	o.lease.mu.Lock()
	if o.lease.fenced {
		o.lease.mu.Unlock()
		return // fenced already (the watch and the renewal loop may both see it)
	}
	o.lease.fenced = true
	cancel := o.lease.cancel
	o.lease.mu.Unlock()
	o.metrics.fenced()
	o.invalidate()
	if cancel != nil {
		cancel(fmt.Errorf("%w: %w", ErrFenced, cause))
	}
}

// errLeaseLost: the lease is not this run's any more (taken over, expired,
// or written by another run of the same process ID).
var errLeaseLost = errors.New("pool: lease lost")

// acquire creates this process's lease. A live lease under its key — a
// previous run that crashed, a duplicate process, or a peer that took it
// over and is adopting its sessions — is waited out: acquire polls until it
// expires or is released. This run's own lease (after a fence whose lease
// had not expired yet) is simply renewed.
func (o *Owner) acquire(ctx context.Context) error {
	l, ttl := o.leaseValue(), o.cfg.LeaseTTL
	poll := o.cfg.leasePoll()
	var waitingFor string
	for {
		if o.holdLeaseRenewal() {
			// Frozen (a test's fault): no lease write at all, so the
			// server expires the lease and a peer may take it over.
			if sleep(ctx, poll); ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		sent := time.Now()
		// Each call is bounded (leaseCall): a write the bucket's leader
		// received and never answered (it died with it) must not hold the
		// process until the client's default timeout; the next attempt
		// settles it (this run's instance = it landed).
		cctx, cancel := context.WithTimeout(ctx, o.cfg.leaseCall())
		rev, err := o.cfg.Store.AcquireLease(cctx, l, ttl)
		cancel()
		var owned *record.OwnedError
		switch {
		case err == nil:
			o.setLease(rev, sent)
			o.log.Info("lease acquired", "ttl", ttl, "renew", o.cfg.LeaseRenew, "fence_after", o.cfg.fenceAfter(), "rev", rev)
			return nil
		case errors.As(err, &owned):
			if rev, ok := o.reacquireOwn(ctx, l, ttl); ok {
				o.log.Info("lease re-acquired (still held by this run)", "rev", rev)
				return nil
			}
			if waitingFor != owned.Owner {
				waitingFor = owned.Owner
				o.log.Info("lease key is live; waiting for it to expire", "holder", owned.Owner)
			}
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			o.log.Warn("acquire lease failed; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// reacquireOwn renews this run's own lease (a fence whose lease had not
// expired, or an acquisition whose reply was lost) at the revision read
// back, each call bounded by leaseCall.
func (o *Owner) reacquireOwn(ctx context.Context, l kv.Lease, ttl time.Duration) (uint64, bool) {
	cctx, cancel := context.WithTimeout(ctx, o.cfg.leaseCall())
	cur, crev, err := o.cfg.Store.GetLease(cctx, o.cfg.ProcessID)
	cancel()
	if err != nil || cur.Instance != o.instance || cur.Holder != "" {
		return 0, false
	}
	sent := time.Now()
	cctx, cancel = context.WithTimeout(ctx, o.cfg.leaseCall())
	rev, err := o.cfg.Store.RenewLease(cctx, l, crev, ttl)
	cancel()
	if err != nil {
		return 0, false
	}
	o.setLease(rev, sent)
	return rev, true
}

// renewLoop renews the lease every LeaseRenew. A failed renewal is retried
// quickly; one whose reply was lost is settled by reading the lease back
// (this run's instance at a newer revision = it landed). A lease not
// renewed within TTL − TTL/4 pauses the process (see leaseState) until a
// renewal lands; a lease the store shows lost fences it.
func (o *Owner) renewLoop(ctx context.Context) {
	retry := min(o.cfg.LeaseRenew/4, 100*time.Millisecond)
	next := time.Now().Add(o.cfg.LeaseRenew)
	uncertain := false
	var pausedAt time.Time // zero while the lease is valid
	for {
		deadline := o.born.Add(time.Duration(o.lease.validUntil.Load()))
		wake := next
		if pausedAt.IsZero() && deadline.Before(wake) {
			wake = deadline
		}
		t := time.NewTimer(time.Until(wake))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if !o.leaseValid() && pausedAt.IsZero() {
			pausedAt = time.Now()
			o.metrics.paused()
			o.log.Warn("lease not renewed in time: every session pauses until a renewal lands",
				"fence_after", o.cfg.fenceAfter())
			uncertain = true // settle by reading the lease back
		}
		if o.holdLeaseRenewal() {
			if !pausedAt.IsZero() {
				// A test's fault: a process that cannot renew at all
				// fences at its deadline, so the releases of its runs
				// land before the server can expire the lease.
				o.fence(fmt.Errorf("lease not renewed within %v (renewals held)", o.cfg.fenceAfter()))
				return
			}
			next = time.Now().Add(retry)
			continue
		}
		sent := time.Now()
		// A renewal is bounded by the fence deadline, or while paused by
		// the lease call bound (a write the leader swallowed is sent again).
		if !pausedAt.IsZero() {
			deadline = sent.Add(o.cfg.leaseCall())
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		rev, err := o.renewOnce(rctx, uncertain)
		cancel()
		if err == nil {
			o.metrics.renewals.WithLabelValues("ok").Inc()
		} else {
			o.metrics.renewals.WithLabelValues("error").Inc()
		}
		switch {
		case err == nil:
			o.setLease(rev, sent)
			uncertain = false
			next = sent.Add(o.cfg.LeaseRenew)
			if !pausedAt.IsZero() {
				o.log.Info("lease renewed after a pause: every session goes on", "paused", time.Since(pausedAt).Round(time.Millisecond), "rev", rev)
				pausedAt = time.Time{}
			}
		case errors.Is(err, errLeaseLost):
			o.fence(err)
			return
		case ctx.Err() != nil:
			return
		default:
			if !uncertain {
				o.log.Warn("lease renewal failed; retrying", "err", err)
			}
			uncertain = true
			next = time.Now().Add(retry)
			if !pausedAt.IsZero() {
				next = time.Now().Add(o.cfg.leasePoll())
			}
		}
	}
}

// renewOnce renews at the last known revision, or, after an uncertain
// renewal or a conflict, at the revision of this run's lease as read back.
func (o *Owner) renewOnce(ctx context.Context, uncertain bool) (uint64, error) {
	if o.failLeaseRenewal() {
		return 0, errors.New("pool: lease renewal failed (injected: the bucket has no leader)")
	}
	rev := o.leaseRev()
	if uncertain {
		cur, crev, err := o.cfg.Store.GetLease(ctx, o.cfg.ProcessID)
		switch {
		case errors.Is(err, record.ErrNotFound):
			return 0, fmt.Errorf("%w: expired", errLeaseLost)
		case err != nil:
			return 0, err
		case cur.Instance != o.instance || cur.Holder != "":
			return 0, fmt.Errorf("%w: held by %s (instance %q)", errLeaseLost, cmp.Or(cur.Holder, cur.ProcessID), cur.Instance)
		}
		rev = crev
	}
	nrev, err := o.cfg.Store.RenewLease(ctx, o.leaseValue(), rev, o.cfg.LeaseTTL)
	if err == nil && o.loseLeaseReply() {
		return 0, errors.New("pool: lease renewal reply lost (injected)")
	}
	if errors.Is(err, record.ErrConflict) {
		if uncertain {
			return 0, fmt.Errorf("%w: %w", errLeaseLost, err)
		}
		return o.renewOnce(ctx, true)
	}
	return nrev, err
}

// release removes the lease on shutdown, so peers adopt the sessions at
// once instead of waiting for the TTL.
func (o *Owner) release() {
	o.invalidate()
	o.lease.mu.Lock()
	rev, held := o.lease.rev, o.lease.held
	o.lease.held = false
	o.lease.mu.Unlock()
	if !held {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := o.cfg.Store.ReleaseLease(ctx, o.cfg.ProcessID, rev)
	if errors.Is(err, record.ErrConflict) {
		// A renewal landed while its reply was lost: this run's view of the
		// revision is stale. Release at the current one if it is still ours.
		if cur, crev, gerr := o.cfg.Store.GetLease(ctx, o.cfg.ProcessID); gerr == nil && cur.Instance == o.instance && cur.Holder == "" {
			err = o.cfg.Store.ReleaseLease(ctx, o.cfg.ProcessID, crev)
		}
	}
	if err != nil {
		o.log.Warn("lease not released; peers adopt after its TTL", "err", err)
		return
	}
	o.log.Info("lease released")
}

// ownLeaseEvent fences the process when the watch shows its lease expired
// or written by someone else after this run's last write.
// A paused process is fenced too: the event is the evidence that its lease
// is gone.
func (o *Owner) ownLeaseEvent(ev kv.LeaseEvent) {
	if ev.Initial || ev.Revision <= o.leaseRev() || !o.leaseHeld() {
		return
	}
	if ev.Lease != nil && ev.Lease.Instance == o.instance && ev.Lease.Holder == "" {
		return // this run's own renewal
	}
	o.fence(fmt.Errorf("%w: the lease watch shows it expired or taken at revision %d", errLeaseLost, ev.Revision))
}
