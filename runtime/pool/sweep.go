package pool

import (
	"context"
	"errors"
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
	index    func() *kv.Index
	// idleNext is where the idle sweep's walk of the index continues
	// ("": from the start).
	idleNext string
	// retainNext is where the retention sweep's walk of the index
	// continues ("": from the start).
	retainNext string
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

// sweep is belt and braces for the lease watch, and finds its work from
// three small listings, never by reading every session record
// (docs/kv-records.md, "What a sweep reads"):
//
//   - the registered processes of this deployment (kv.Store.ListProcesses):
//     each one without a live lease is adopted through its lease key
//     (TakeoverLease, so a live one is never adopted) — a crash between an
//     index write and a claim, an adopter that died half way, a process
//     that died while nobody watched;
//   - this process's own index: a session whose record names this process
//     but does not run here is re-claimed;
//   - the quarantine index (kv.Store.ListQuarantined): a quarantined
//     session with a pending operator finish is finished (finishAll), and
//     the quarantined gauge counts this deployment's;
//   - the delete index (kv.Store.ListDeletions): an ended session whose
//     delete was asked for is deleted (sweepDeletions);
//   - with EndIdleAfter or RetainEnded, one page of the session index
//     each: idle hibernated sessions to expire, ended ones to delete.
//
// Records are read by direct get only for what the listings name: hints,
// decided by CAS. The sessions no owner runs (hibernated, ended) are in
// none of them.
func (o *sweeper) sweep(ctx context.Context) {
	o.sweepProcesses(ctx)
	o.sweepOwn(ctx)
	o.sweepQuarantined(ctx)
	o.sweepIdle(ctx)
	o.sweepDeletions(ctx)
	o.sweepRetention(ctx)
}

// sweepProcesses adopts every registered process of this deployment that
// has no live lease (adopt takes its lease key over first, and unregisters
// it once its whole index is adopted).
func (o *sweeper) sweepProcesses(ctx context.Context) {
	pids, err := o.cfg.Store.ListProcesses(ctx, o.cfg.Deployment)
	if err != nil {
		o.log.Debug("sweep: list processes", "err", err)
		return
	}
	for _, pid := range pids {
		if pid == o.cfg.ProcessID || o.peers.live(pid) {
			continue
		}
		o.log.Debug("sweep: a registered owner process without a live lease", "dead", pid)
		o.adoption.adopt(ctx, pid, nil)
	}
}

// sweepOwn re-claims the sessions of this process's index whose record
// names it but that do not run here (a resume or restart that gave up).
func (o *sweeper) sweepOwn(ctx context.Context) {
	ids, err := o.cfg.Store.ListIndex(ctx, o.cfg.ProcessID)
	if err != nil {
		o.log.Debug("sweep: list own index", "err", err)
		return
	}
	for _, id := range ids {
		if !o.reg.beginLoad(id) { // running here, or being claimed
			continue
		}
		o.reg.endLoad(id)
		cur, err := o.cfg.Store.GetSession(ctx, id)
		if err != nil {
			continue
		}
		r := cur.Record
		if r.OwnerProcess != o.cfg.ProcessID || r.DeploymentID != o.cfg.Deployment || !needsOwner(r.State) {
			continue
		}
		// Wake re-reads the record from the leader before claiming.
		if rep := o.wake(ctx, protocol.WakeRequest{SessionID: id, From: o.cfg.ProcessID, Source: protocol.WakeSweeper}); rep.Outcome == protocol.WakeLoaded {
			o.log.Info("sweep: re-claimed a session of this process that did not run", "session", id)
		}
	}
}

// sweepQuarantined reads the record of each quarantine index entry (a
// quarantined session, or one whose end was requested while no owner of
// its deployment ran): a pending finish whose finisher is not a live peer
// is finished here, an entry whose record is neither is removed (the
// finisher's own removal failed), and this deployment's quarantined
// sessions are counted.
func (o *sweeper) sweepQuarantined(ctx context.Context) {
	entries, err := o.cfg.Store.ListQuarantined(ctx)
	if err != nil {
		o.log.Debug("sweep: list quarantined", "err", err)
		return
	}
	var finishes []string
	quarantined := 0
	for _, q := range entries {
		cur, err := o.cfg.Store.GetSession(ctx, q.SessionID)
		switch {
		case errors.Is(err, record.ErrNotFound):
			o.unindexQuarantined(ctx, q)
			continue
		case err != nil:
			continue
		}
		r := cur.Record
		if !r.Quarantined() && !r.FinishPending() {
			o.unindexQuarantined(ctx, q)
			continue
		}
		// Counted by the deployment that quarantined it (an adopter of a
		// retired deployment's session, or the session's own).
		quarantined += b2i(r.Quarantined() && q.DeploymentID == o.cfg.Deployment)
		if r.FinishPending() && (r.OwnerProcess == "" || r.OwnerProcess == o.cfg.ProcessID || !o.peers.live(r.OwnerProcess)) {
			finishes = append(finishes, q.SessionID)
		}
	}
	o.metrics.quarantinedG.Set(float64(quarantined))
	o.fin.finishAll(ctx, finishes)
}

// unindexQuarantined removes a quarantine index entry whose record is
// gone or no longer quarantined, best effort.
func (o *sweeper) unindexQuarantined(ctx context.Context, q kv.Quarantined) {
	if err := o.cfg.Store.RemoveQuarantined(ctx, q.DeploymentID, q.SessionID); err != nil {
		o.log.Debug("sweep: remove a stale quarantine index entry", "session", q.SessionID, "err", err)
	}
}

// finishLater carries out session id's pending finish in the background:
// an owner that found it while loading or waking the session (no owner
// runs a session whose end is pending).
func (o *finisher) finishLater(id string) {
	ctx := o.reg.serving()
	o.reg.goBG(ctx, func() {
		rep := o.Finish(ctx, id, true)
		o.log.Info("a pending end found at a load", "session", id, "outcome", rep.Outcome, "error", rep.Error)
	})
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
