package pool

import (
	"context"
	"errors"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
)

// The deletes a sweep carries out (docs/driver.md, "Retention"): those in
// the delete index (kv.ListDeletions) — asked for while no owner ran,
// whose finisher died, or forced on a live session that has ended since —
// and, with Config.RetainEnded, the ended sessions of one page of the
// session index that ended that long ago. Nothing scans the records.

// retentionSweepBatch bounds the index entries one sweep reads for
// retention.
const retentionSweepBatch = 100

// sweepDeletions carries out every pending delete of the delete index
// whose session has ended; an entry whose session is deleted or gone is
// removed.
func (o *sweeper) sweepDeletions(ctx context.Context) {
	ds, err := o.cfg.Store.ListDeletions(ctx)
	if err != nil {
		o.log.Debug("sweep: list deletions", "err", err)
		return
	}
	var ids []string
	for _, d := range ds {
		cur, err := o.cfg.Store.GetSession(ctx, d.SessionID)
		switch {
		case errors.Is(err, record.ErrNotFound) || err == nil && cur.Record.IsDeleted():
			if err := o.cfg.Store.RemoveDeletion(ctx, d.SessionID); err != nil {
				o.log.Debug("sweep: remove a delete index entry", "session", d.SessionID, "err", err)
			}
			continue
		case err != nil || cur.Record.State != record.StateEnded:
			continue // a forced delete waits for its session's end
		}
		if id, ok := o.fin.askDelete(ctx, cur, d.Reason); ok {
			ids = append(ids, id)
		}
	}
	o.fin.finishAll(ctx, ids)
}

// askDelete writes the delete request into the ended record cur if it has
// none, and reports whether this owner should carry it out (no live peer
// is at it).
func (o *finisher) askDelete(ctx context.Context, cur record.Session, reason string) (string, bool) {
	r := cur.Record
	if !r.FinishPending() {
		f := record.FinishRequest{Op: record.FinishDelete, Reason: reason, By: "finish-" + newID(), At: o.now()}
		asked, err := record.RequestFinish(r, f)
		if err != nil {
			o.log.Debug("sweep: a delete not asked for", "session", r.SessionID, "err", err)
			return "", false
		}
		if _, err := o.out.casRecord(ctx, asked, cur.Revision); err != nil {
			return "", false // decided again at the next sweep
		}
		return r.SessionID, true
	}
	p := r.OwnerProcess
	return r.SessionID, p == "" || p == o.cfg.ProcessID || !o.peers.live(p)
}

// sweepRetention deletes the ended sessions of one page of the session
// index (any deployment's: an ended session runs nowhere) that ended
// Config.RetainEnded or more ago, the walk continuing where the last
// sweep stopped.
func (o *sweeper) sweepRetention(ctx context.Context) {
	keep := o.cfg.RetainEnded
	x := o.index()
	if keep <= 0 || x == nil {
		return
	}
	page, err := x.List(ctx, kv.IndexQuery{State: string(record.StateEnded)}, o.retainNext, retentionSweepBatch)
	if err != nil {
		o.log.Debug("sweep: ended sessions", "err", err)
		o.retainNext = ""
		return
	}
	o.retainNext = page.Next
	now := o.cfg.Now()
	var ids []string
	for _, e := range page.Entries {
		cur, err := o.cfg.Store.GetSession(ctx, e.SessionID)
		if err != nil || cur.Record.State != record.StateEnded || cur.Record.IsDeleted() || now.Sub(cur.Record.UpdatedAt) < keep {
			continue
		}
		if err := o.cfg.Store.AddDeletion(ctx, kv.Deletion{SessionID: e.SessionID, Reason: record.DeleteByRetention}); err != nil {
			o.log.Debug("sweep: index a retention delete", "session", e.SessionID, "err", err)
			continue
		}
		if id, ok := o.fin.askDelete(ctx, cur, record.DeleteByRetention); ok {
			ids = append(ids, id)
		}
	}
	o.fin.finishAll(ctx, ids)
}
