package pool

import (
	"context"
	"log/slog"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
)

// sweeper runs the pool's two sweeps: the orphan sweep (sessions whose
// owner process has no live lease, pending finishes) and the inbox sweep
// (hibernated sessions with an unprocessed command). It finds work and
// hands it on: to the adopter, the finisher, or a wake (Owner.Wake here,
// or the pool's queue group).
type sweeper struct {
	cfg      *Config
	log      *slog.Logger
	metrics  *metrics
	reg      *registry
	peers    *peerSet
	adoption *adopter
	fin      *finisher
	wakes    *wakes
	retire   *retirement
	backlog  kv.Backlog
	wake     func(context.Context, protocol.WakeRequest) protocol.WakeReply // Owner.Wake
}

// sweepLoop runs the orphan sweeper every SweepInterval (±10 %, so the
// pool's sweeps do not line up).
func (o *sweeper) sweepLoop(ctx context.Context) {
	jittered(ctx, o.cfg.SweepInterval, func() { o.sweep(ctx) })
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// needsOwner: the states in which a session has a running owner (never
// ended, hibernated or quarantined).
func needsOwner(st record.State) bool {
	return st == record.StateActive || st == record.StateHandoff || st == record.StatePaused
}

// sweep adopts the sessions of this deployment whose record names an owner
// process without a live lease — belt and braces for the lease watch: a
// crash between an index write and a claim, an adopter that died half way,
// a process that died while nobody watched. Each dead owner is adopted
// through its lease key (TakeoverLease, so a live one is never adopted). A
// session whose record names this process but does not run here is
// re-claimed. A quarantined session with a pending operator finish is
// finished (finishAll). Records are read by direct get: hints, decided by
// CAS.
func (o *sweeper) sweep(ctx context.Context) {
	ids, err := o.cfg.Store.ListSessions(ctx)
	if err != nil {
		o.log.Debug("sweep: list sessions", "err", err)
		return
	}
	orphans := map[string][]string{}
	var finishes []string
	var hibernated, quarantined int
	defer func() {
		o.metrics.hibernatedG.Set(float64(hibernated))
		o.metrics.quarantinedG.Set(float64(quarantined))
	}()
	for _, id := range ids {
		cur, err := o.cfg.Store.GetSession(ctx, id)
		if err != nil {
			continue
		}
		r := cur.Record
		hibernated += b2i(r.DeploymentID == o.cfg.Deployment && r.State == record.StateHibernated)
		// Counted by the deployment that quarantined it (an adopter of a
		// retired deployment's session, or the session's own).
		quarantined += b2i(r.Quarantined() && r.Quarantine != nil && r.Quarantine.DeploymentID == o.cfg.Deployment)
		if r.FinishPending() && (r.OwnerProcess == "" || r.OwnerProcess == o.cfg.ProcessID || !o.peers.live(r.OwnerProcess)) {
			finishes = append(finishes, id)
		}
		if r.DeploymentID != o.cfg.Deployment || !needsOwner(r.State) || r.OwnerProcess == "" {
			continue
		}
		switch {
		case r.OwnerProcess == o.cfg.ProcessID:
			if o.reg.beginLoad(id) { // not running here, not being claimed
				o.reg.endLoad(id)
				// Wake re-reads the record from the leader before claiming.
				if rep := o.wake(ctx, protocol.WakeRequest{SessionID: id, From: o.cfg.ProcessID, Source: protocol.WakeSweeper}); rep.Outcome == protocol.WakeLoaded {
					o.log.Info("sweep: re-claimed a session of this process that did not run", "session", id)
				}
			}
		case !o.peers.live(r.OwnerProcess):
			orphans[r.OwnerProcess] = append(orphans[r.OwnerProcess], id)
		}
	}
	for dead, ids := range orphans {
		o.log.Debug("sweep: sessions whose owner process has no live lease", "dead", dead, "sessions", len(ids))
		o.adoption.adopt(ctx, dead, ids)
	}
	o.fin.finishAll(ctx, finishes)
}

// finishAll carries out the pending finishes a sweep found (an operator's
// end or retry requested while no owner ran, or whose finisher died): a
// session of another deployment is relayed to that deployment's pool and
// finished here only when none of its owners answers (Finish).
func (o *finisher) finishAll(ctx context.Context, ids []string) {
	eachBounded(ctx, ids, 4, func(id string) {
		rep := o.Finish(ctx, id, true)
		o.log.Info("sweep: a pending finish of a quarantined session", "session", id, "outcome", rep.Outcome, "error", rep.Error)
	})
}
