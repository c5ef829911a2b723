package pool

import (
	"context"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// Idle expiry (Config.EndIdleAfter, docs/driver.md "Idle expiry"): a
// session that had no command for that long ends with reason idle_expired.
// A loaded one ends itself at its next tick (session.maybeExpire); a
// hibernated one is found here, in the session index — this deployment's
// hibernated sessions without a durable wait, a page per sweep, the walk
// continuing where the last sweep stopped — and loaded, which ends it the
// same way. Nothing scans the session records.

// idleSweepBatch bounds the index entries one sweep reads for idle expiry.
const idleSweepBatch = 100

// sweepIdle loads the hibernated sessions of this deployment, from one page
// of the index, that had no command for Config.EndIdleAfter (their
// record's last write, the hibernation, is older): not paused and without
// a durable wait. The session ends itself once loaded.
func (o *sweeper) sweepIdle(ctx context.Context) {
	limit := o.cfg.EndIdleAfter
	x := o.index()
	if limit <= 0 || x == nil {
		return
	}
	q := kv.IndexQuery{Deployment: o.cfg.Deployment, State: string(record.StateHibernated)}
	page, err := x.List(ctx, q, o.idleNext, idleSweepBatch)
	if err != nil {
		o.log.Debug("sweep: idle sessions", "err", err)
		o.idleNext = ""
		return
	}
	o.idleNext = page.Next
	now := o.cfg.Now()
	for _, e := range page.Entries {
		if len(e.WaitingFor) > 0 || !o.idleFor(ctx, e.SessionID, now, limit) {
			continue
		}
		rep := o.wake(ctx, protocol.WakeRequest{SessionID: e.SessionID, Source: protocol.WakeExpire})
		o.log.Debug("sweep: an idle session loaded to expire", "session", e.SessionID, "outcome", rep.Outcome, "error", rep.Error)
	}
}

// idleFor reports whether session id is hibernated, was last written
// limit or more before now, and is neither paused nor waiting.
func (o *sweeper) idleFor(ctx context.Context, id string, now time.Time, limit time.Duration) bool {
	cur, err := o.cfg.Store.GetSession(ctx, id)
	if err != nil || cur.Record.State != record.StateHibernated || now.Sub(cur.Record.UpdatedAt) < limit {
		return false
	}
	cp, err := wire.DecodeCheckpoint(cur.Record.Checkpoint)
	return err == nil && !cp.Paused && len(record.DurableWaits(cp)) == 0
}
