package pool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"log/slog"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
)

// lease is this process's own lease: baton_owners/lease.<processID>, its
// acquisition, renewal loop, pause, fence and release. It has its own lock
// and knows nothing of the sessions: they ask it (valid, await) before
// each effect, and the serving context it cancels at a fence stops them.
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
type lease struct {
	cfg      *Config
	log      *slog.Logger
	metrics  *metrics
	fp       points
	born     time.Time // monotonic origin of validUntil
	instance string    // nonce of this Run, written into the lease (set by Run)

	mu         sync.Mutex
	rev        uint64 // revision of this run's last lease write
	held       bool   // acquired and not released
	fenced     bool   // fenced since the last lease write
	cancel     context.CancelCauseFunc
	renewed    chan struct{} // closed and replaced at each lease write
	validUntil atomic.Int64  // nanoseconds since born; 0 = not held
}

func (ls *lease) value() kv.Lease {
	return kv.Lease{ProcessID: ls.cfg.ProcessID, DeploymentID: ls.cfg.Deployment, Instance: ls.instance}
}

// leaseValid reports whether this process may act for its sessions now.
func (ls *lease) valid() bool {
	return int64(time.Since(ls.born)) < ls.validUntil.Load()
}

// setLease records a successful lease write sent at sent, and wakes the
// sessions waiting in awaitLease.
func (ls *lease) set(rev uint64, sent time.Time) {
	ls.validUntil.Store(int64(sent.Add(ls.cfg.fenceAfter()).Sub(ls.born)))
	ls.mu.Lock()
	ls.rev, ls.held, ls.fenced = rev, true, false
	if ls.renewed != nil {
		close(ls.renewed)
	}
	ls.renewed = make(chan struct{})
	ls.mu.Unlock()
}

// awaitLease returns at once while the lease is valid. While the process is
// paused (its renewal overdue) it waits for the renewal to land, and
// returns ErrFenced if the process fences instead, or ctx's error if ctx
// ends. The serving context of every session ends at a fence, so a session
// passes its own context.
func (ls *lease) await(ctx context.Context) error {
	for {
		ls.mu.Lock()
		renewed := ls.renewed
		ls.mu.Unlock()
		if ls.valid() {
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
func (ls *lease) holding() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.held && !ls.fenced
}

func (ls *lease) revision() uint64 {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.rev
}

func (ls *lease) invalidate() { ls.validUntil.Store(0) }

func (l *lease) setCancel(c context.CancelCauseFunc) {
	l.mu.Lock()
	l.cancel = c
	l.mu.Unlock()
}

// fence stops the current lease period: every session stops at once (no
// further commit, publish or step), requests are no longer served, and Run
// acquires the lease again.
func (ls *lease) fence(cause error) {
	ls.mu.Lock()
	if ls.fenced {
		ls.mu.Unlock()
		return // fenced already (the watch and the renewal loop may both see it)
	}
	ls.fenced = true
	cancel := ls.cancel
	ls.mu.Unlock()
	ls.metrics.fenced()
	ls.invalidate()
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
func (ls *lease) acquire(ctx context.Context) error {
	l, ttl := ls.value(), ls.cfg.LeaseTTL
	poll := ls.cfg.leasePoll()
	var waitingFor string
	for {
		if ls.fp.holdLeaseRenewal() {
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
		cctx, cancel := context.WithTimeout(ctx, ls.cfg.leaseCall())
		rev, err := ls.cfg.Store.AcquireLease(cctx, l, ttl)
		cancel()
		var owned *record.OwnedError
		switch {
		case err == nil:
			ls.set(rev, sent)
			ls.log.Info("lease acquired", "ttl", ttl, "renew", ls.cfg.LeaseRenew, "fence_after", ls.cfg.fenceAfter(), "rev", rev)
			return nil
		case errors.As(err, &owned):
			if rev, ok := ls.reacquireOwn(ctx, l, ttl); ok {
				ls.log.Info("lease re-acquired (still held by this run)", "rev", rev)
				return nil
			}
			if waitingFor != owned.Owner {
				waitingFor = owned.Owner
				ls.log.Info("lease key is live; waiting for it to expire", "holder", owned.Owner)
			}
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			ls.log.Warn("acquire lease failed; retrying", "err", err)
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
func (ls *lease) reacquireOwn(ctx context.Context, l kv.Lease, ttl time.Duration) (uint64, bool) {
	cctx, cancel := context.WithTimeout(ctx, ls.cfg.leaseCall())
	cur, crev, err := ls.cfg.Store.GetLease(cctx, ls.cfg.ProcessID)
	cancel()
	if err != nil || cur.Instance != ls.instance || cur.Holder != "" {
		return 0, false
	}
	sent := time.Now()
	cctx, cancel = context.WithTimeout(ctx, ls.cfg.leaseCall())
	rev, err := ls.cfg.Store.RenewLease(cctx, l, crev, ttl)
	cancel()
	if err != nil {
		return 0, false
	}
	ls.set(rev, sent)
	return rev, true
}

// renewLoop renews the lease every LeaseRenew. A failed renewal is retried
// quickly; one whose reply was lost is settled by reading the lease back
// (this run's instance at a newer revision = it landed). A lease not
// renewed within TTL − TTL/4 pauses the process (see lease) until a
// renewal lands; a lease the store shows lost fences it.
func (ls *lease) renewLoop(ctx context.Context) {
	retry := min(ls.cfg.LeaseRenew/4, 100*time.Millisecond)
	next := time.Now().Add(ls.cfg.LeaseRenew)
	uncertain := false
	var pausedAt time.Time // zero while the lease is valid
	for {
		deadline := ls.born.Add(time.Duration(ls.validUntil.Load()))
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
		if !ls.valid() && pausedAt.IsZero() {
			pausedAt = time.Now()
			ls.metrics.paused()
			ls.log.Warn("lease not renewed in time: every session pauses until a renewal lands",
				"fence_after", ls.cfg.fenceAfter())
			uncertain = true // settle by reading the lease back
		}
		if ls.fp.holdLeaseRenewal() {
			if !pausedAt.IsZero() {
				// A test's fault: a process that cannot renew at all
				// fences at its deadline, so the releases of its runs
				// land before the server can expire the lease.
				ls.fence(fmt.Errorf("lease not renewed within %v (renewals held)", ls.cfg.fenceAfter()))
				return
			}
			next = time.Now().Add(retry)
			continue
		}
		sent := time.Now()
		// A renewal is bounded by the fence deadline, or while paused by
		// the lease call bound (a write the leader swallowed is sent again).
		if !pausedAt.IsZero() {
			deadline = sent.Add(ls.cfg.leaseCall())
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		rev, err := ls.renewOnce(rctx, uncertain)
		cancel()
		if err == nil {
			ls.metrics.renewals.WithLabelValues("ok").Inc()
		} else {
			ls.metrics.renewals.WithLabelValues("error").Inc()
		}
		switch {
		case err == nil:
			ls.set(rev, sent)
			uncertain = false
			next = sent.Add(ls.cfg.LeaseRenew)
			if !pausedAt.IsZero() {
				ls.log.Info("lease renewed after a pause: every session goes on", "paused", time.Since(pausedAt).Round(time.Millisecond), "rev", rev)
				pausedAt = time.Time{}
			}
		case errors.Is(err, errLeaseLost):
			ls.fence(err)
			return
		case ctx.Err() != nil:
			return
		default:
			if !uncertain {
				ls.log.Warn("lease renewal failed; retrying", "err", err)
			}
			uncertain = true
			next = time.Now().Add(retry)
			if !pausedAt.IsZero() {
				next = time.Now().Add(ls.cfg.leasePoll())
			}
		}
	}
}

// renewOnce renews at the last known revision, or, after an uncertain
// renewal or a conflict, at the revision of this run's lease as read back.
func (ls *lease) renewOnce(ctx context.Context, uncertain bool) (uint64, error) {
	if ls.fp.failLeaseRenewal() {
		return 0, errors.New("pool: lease renewal failed (injected: the bucket has no leader)")
	}
	rev := ls.revision()
	if uncertain {
		cur, crev, err := ls.cfg.Store.GetLease(ctx, ls.cfg.ProcessID)
		switch {
		case errors.Is(err, record.ErrNotFound):
			return 0, fmt.Errorf("%w: expired", errLeaseLost)
		case err != nil:
			return 0, err
		case cur.Instance != ls.instance || cur.Holder != "":
			return 0, fmt.Errorf("%w: held by %s (instance %q)", errLeaseLost, cmp.Or(cur.Holder, cur.ProcessID), cur.Instance)
		}
		rev = crev
	}
	nrev, err := ls.cfg.Store.RenewLease(ctx, ls.value(), rev, ls.cfg.LeaseTTL)
	if err == nil && ls.fp.loseLeaseReply() {
		return 0, errors.New("pool: lease renewal reply lost (injected)")
	}
	if errors.Is(err, record.ErrConflict) {
		if uncertain {
			return 0, fmt.Errorf("%w: %w", errLeaseLost, err)
		}
		return ls.renewOnce(ctx, true)
	}
	return nrev, err
}

// release removes the lease on shutdown, so peers adopt the sessions at
// once instead of waiting for the TTL.
func (ls *lease) release() {
	ls.invalidate()
	ls.mu.Lock()
	rev, held := ls.rev, ls.held
	ls.held = false
	ls.mu.Unlock()
	if !held {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := ls.cfg.Store.ReleaseLease(ctx, ls.cfg.ProcessID, rev)
	if errors.Is(err, record.ErrConflict) {
		// A renewal landed while its reply was lost: this run's view of the
		// revision is stale. Release at the current one if it is still ours.
		if cur, crev, gerr := ls.cfg.Store.GetLease(ctx, ls.cfg.ProcessID); gerr == nil && cur.Instance == ls.instance && cur.Holder == "" {
			err = ls.cfg.Store.ReleaseLease(ctx, ls.cfg.ProcessID, crev)
		}
	}
	if err != nil {
		ls.log.Warn("lease not released; peers adopt after its TTL", "err", err)
		return
	}
	ls.log.Info("lease released")
}

// ownLeaseEvent fences the process when the watch shows its lease expired
// or written by someone else after this run's last write.
// A paused process is fenced too: the event is the evidence that its lease
// is gone.
func (ls *lease) ownEvent(ev kv.LeaseEvent) {
	if ev.Initial || ev.Revision <= ls.revision() || !ls.holding() {
		return
	}
	if ev.Lease != nil && ev.Lease.Instance == ls.instance && ev.Lease.Holder == "" {
		return // this run's own renewal
	}
	ls.fence(fmt.Errorf("%w: the lease watch shows it expired or taken at revision %d", errLeaseLost, ev.Revision))
}
