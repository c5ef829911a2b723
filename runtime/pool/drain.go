package pool

import (
	"context"
	"errors"
	"time"
)

// ErrDraining reports that this owner process is draining: it takes no new
// session.
var ErrDraining = errors.New("pool: owner process draining")

// drain is the graceful shutdown (Config.DrainTimeout): stop taking new
// work (serve unsubscribes start and wake, no new task is fetched, reserve
// refuses), let each running step finish and commit, hibernate every
// session — a peer of the pool loads it on its next command; no handoff
// transaction within a deployment — and return when none is loaded or the
// timeout passed. Run then stops what is left (its uncommitted step re-runs
// on the next owner) and releases the lease.
func (o *Owner) drain(ctx context.Context) {
	began := time.Now()
	o.draining.Store(true)
	close(o.drainCh)
	o.log.Info("draining: no new work; hibernating every session", "loaded", len(o.Loaded()), "timeout", o.cfg.DrainTimeout)
	deadline := time.NewTimer(o.cfg.DrainTimeout)
	defer deadline.Stop()
	for {
		n, room := o.reg.hibernateAll()
		if n == 0 {
			o.log.Info("drained: every session hibernated", "took", time.Since(began).Round(time.Millisecond))
			return
		}
		select {
		case <-room:
		case <-time.After(100 * time.Millisecond):
		case <-deadline.C:
			o.log.Warn("drain timed out; stopping the rest (their uncommitted steps re-run on the next owner)", "left", n)
			return
		case <-ctx.Done():
			return
		}
	}
}
