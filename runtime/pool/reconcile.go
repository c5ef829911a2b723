package pool

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// reconciler keeps the session index true to the session records
// (docs/nats-layout.md, "The session index"). Every
// IndexReconcileInterval it reads the next IndexReconcileBatch keys of
// two streams, each from where its last run stopped, wrapping at the end:
//
//   - the session records' (every revision the bucket still holds): each
//     session of this process's share is re-derived from its record and
//     its entry rewritten where it differs (kv.Index.Put; its postings go
//     with it) — a lost owner write, a process killed between a record
//     change and its index write — and its storage counted if it has none;
//   - the index's: an entry whose record is gone is removed, and a
//     posting its entry does not have (left by a crash mid-move) deleted.
//
// Shares split the key space across every live owner process of the
// fleet (any deployment: a stopped deployment's sessions are still
// indexed), by a hash of the session ID. A rebuild request (the admin
// route) is claimed by one process, which walks both streams whole at
// once, checking every posting and recounting every session's storage;
// if it dies, another claims it.
type reconciler struct {
	cfg      *Config
	log      *slog.Logger
	metrics  *metrics
	peers    *peerSet
	agents   *agents
	index    func() *kv.Index
	reg      *registry                                           // the process's background goroutines (indexLater)
	blobs    func(ctx context.Context) (map[string]int64, error) // each session's blob bytes (a rebuild)
	sessions uint64                                              // the walk's next sequence of the records' stream
	entries  uint64                                              // and of the index's
	// blobSizes are the blob bytes by session while a rebuild runs (nil
	// otherwise: a reconcile keeps the stored count).
	blobSizes map[string]int64
}

// postingGrace is how old a posting must be before the reconciler
// removes it as stale.
const postingGrace = time.Minute

// rebuildPoll is how often the reconciler looks for a rebuild request
// (one direct get).
const rebuildPoll = time.Second

// reconcileLoop looks for a rebuild request every rebuildPoll and runs a
// reconcile every IndexReconcileInterval (±10 %; negative: only
// rebuilds).
func (r *reconciler) reconcileLoop(ctx context.Context) {
	if r.cfg.NoIndexReconciler {
		return
	}
	next := time.Now().Add(spread(r.cfg.IndexReconcileInterval))
	for {
		sleep(ctx, min(rebuildPoll, max(r.cfg.IndexReconcileInterval, time.Millisecond)))
		if ctx.Err() != nil {
			return
		}
		x := r.index()
		if x == nil {
			continue
		}
		if req, rev, err := x.Rebuild(ctx); err == nil && req.DoneAt.IsZero() &&
			(req.ClaimedBy == "" || req.ClaimedBy == r.cfg.ProcessID || !r.peers.live(req.ClaimedBy)) {
			r.rebuild(ctx, x, req, rev)
			continue
		}
		if r.cfg.IndexReconcileInterval > 0 && time.Now().After(next) {
			rank, n := r.peers.shardAll(r.cfg.ProcessID)
			mine := func(id string) bool { return inShard(id, rank, n) }
			r.sessions, _, _ = r.walk(ctx, x, r.sessions, x.SessionKeys, r.reconcile(false), mine, "checked")
			r.entries, _, _ = r.walk(ctx, x, r.entries, x.IndexKeys, r.reconcileKey, mine, "")
			next = time.Now().Add(spread(r.cfg.IndexReconcileInterval))
		}
	}
}

// rebuild claims the request (by CAS: one process runs it) and walks both
// streams whole, every session whatever its share, then marks it done.
func (r *reconciler) rebuild(ctx context.Context, x *kv.Index, req kv.IndexRebuild, rev uint64) {
	req.ClaimedBy, req.ClaimedAt = r.cfg.ProcessID, time.Now().UTC()
	rev, err := x.UpdateRebuild(ctx, req, rev)
	if err != nil {
		r.log.Debug("session index rebuild not claimed", "rebuild", req.RebuildID, "err", err)
		return
	}
	r.log.Info("session index rebuild started", "rebuild", req.RebuildID, "requestedAt", req.RequestedAt)
	start, checked := time.Now(), 0
	if r.blobs != nil {
		sizes, err := r.blobs(ctx)
		if err != nil {
			r.log.Warn("session index rebuild: blob sizes not counted", "rebuild", req.RebuildID, "err", err)
		}
		r.blobSizes = sizes
		defer func() { r.blobSizes = nil }()
	}
	all := func(string) bool { return true }
	for _, walk := range []struct {
		keys func(context.Context, uint64, int) ([]string, uint64, error)
		each func(context.Context, *kv.Index, string) bool
	}{{x.SessionKeys, r.reconcile(true)}, {x.IndexKeys, r.reconcileKey}} {
		for from := uint64(1); ctx.Err() == nil; {
			next, n, err := r.walk(ctx, x, from, walk.keys, walk.each, all, "rebuilt")
			if err != nil {
				sleep(ctx, time.Second) // the same batch again
				continue
			}
			checked += n
			if next == 0 || next == from {
				break
			}
			from = next
			r.log.Info("session index rebuild progress", "rebuild", req.RebuildID, "sessions", checked)
		}
	}
	if ctx.Err() != nil {
		return // claimed by a live process no longer: another one takes it over
	}
	req.DoneAt, req.Sessions = time.Now().UTC(), checked
	if _, err := x.UpdateRebuild(ctx, req, rev); err != nil {
		r.log.Warn("session index rebuild not marked done", "rebuild", req.RebuildID, "err", err)
	}
	r.log.Info("session index rebuild done", "rebuild", req.RebuildID, "sessions", checked,
		"took", time.Since(start).Round(time.Millisecond))
}

// walk reads one batch of keys from from and hands each key of a session
// mine accepts to each, counting the sessions each checked as kind; it
// returns where the next batch starts (0: from the stream's start) and
// that count; a batch it could not read is an error (from unchanged).
func (r *reconciler) walk(ctx context.Context, x *kv.Index, from uint64,
	keys func(context.Context, uint64, int) ([]string, uint64, error),
	each func(context.Context, *kv.Index, string) bool, mine func(string) bool, kind string) (uint64, int, error) {
	ks, next, err := keys(ctx, from, r.cfg.IndexReconcileBatch)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("session index reconcile: walk", "err", err)
		}
		return from, 0, err
	}
	seen, n := map[string]bool{}, 0
	for _, k := range ks {
		if ctx.Err() != nil || seen[k] {
			continue
		}
		seen[k] = true
		if id := sessionOfKey(k); id != "" && mine(id) && each(ctx, x, k) {
			n++
			if kind != "" {
				r.metrics.indexed.WithLabelValues(kind).Inc()
			}
		}
	}
	return next, n, nil
}

// sessionOfKey is the session a key of either stream belongs to ("" for
// none: a marker, the rebuild request).
func sessionOfKey(k string) string {
	if id, err := subjects.ParseIndexEntryKey(k); err == nil {
		return id
	}
	if p, err := subjects.ParsePosting(k); err == nil {
		return p.SessionID
	}
	if subjects.ValidateSessionID(k) == nil {
		return k
	}
	return ""
}

// indexLater writes the entry of a record this process just wrote outside
// a session's run (a claim, a quarantine, an operator's finish), in the
// background: the session's own runs write theirs.
func (r *reconciler) indexLater(cur record.Session) {
	x := r.index()
	if x == nil {
		return
	}
	serving := r.reg.serving()
	r.reg.goBG(serving, func() {
		ctx, cancel := context.WithTimeout(serving, session.IndexWriteBudget)
		defer cancel()
		if cur.Record.IsDeleted() {
			if err := x.Delete(ctx, cur.Record.SessionID); err != nil {
				r.log.Debug("a deleted session's index entry not removed (the reconciler removes it)", "session", cur.Record.SessionID, "err", err)
			}
			return
		}
		e, err := r.derive(ctx, cur)
		if err == nil {
			e.Writer = "owner-" + r.cfg.ProcessID
			err = x.Write(ctx, e)
		}
		if err != nil {
			r.log.Debug("session index entry not written (the reconciler heals it)", "session", cur.Record.SessionID, "err", err)
		}
	})
}

// reconcile is reconcileSession, checking every posting exists too when
// verify is set (a rebuild: postings go before their entry, so a
// reconcile that finds the entry right trusts them).
func (r *reconciler) reconcile(verify bool) func(context.Context, *kv.Index, string) bool {
	return func(ctx context.Context, x *kv.Index, k string) bool { return r.reconcileSession(ctx, x, k, verify) }
}

// reconcileSession re-derives the entry of the session whose record key
// is k, or of the entry key k, and repairs it.
func (r *reconciler) reconcileSession(ctx context.Context, x *kv.Index, k string, verify bool) bool {
	id := sessionOfKey(k)
	cur, err := r.cfg.Store.GetSession(ctx, id)
	if errors.Is(err, record.ErrNotFound) || err == nil && cur.Record.IsDeleted() {
		if err := x.Delete(ctx, id); err != nil {
			r.log.Debug("session index reconcile: remove entry", "session", id, "err", err)
		} else {
			r.metrics.indexed.WithLabelValues("removed").Inc()
		}
		return true
	}
	if err != nil {
		r.log.Debug("session index reconcile: read record", "session", id, "err", err)
		return false
	}
	e, err := r.derive(ctx, cur)
	if err != nil {
		r.log.Debug("session index reconcile: derive", "session", id, "err", err)
		return false
	}
	if e.Storage, err = r.recount(ctx, x, id, verify); err != nil {
		r.log.Debug("session index reconcile: storage not counted", "session", id, "err", err)
	}
	out, err := x.Put(ctx, e, verify)
	if err != nil {
		r.log.Debug("session index reconcile: write", "session", id, "err", err)
		return true
	}
	if out == kv.IndexWritten {
		r.metrics.indexed.WithLabelValues("repaired").Inc()
		r.log.Info("session index entry repaired", "session", id, "state", e.State, "revision", e.Revision)
	}
	return true
}

// recount counts a session's storage when a rebuild runs (always) or its
// entry has none yet; nil keeps the stored hint. A reconcile keeps the
// stored blob bytes (counting them lists every object), a rebuild counts
// them once for every session.
func (r *reconciler) recount(ctx context.Context, x *kv.Index, id string, rebuild bool) (*record.Storage, error) {
	cur, _, err := x.Get(ctx, id)
	if err == nil && cur.Storage != nil && !rebuild {
		return nil, nil
	}
	n, size, err := x.CountEvents(ctx, id)
	if err != nil {
		return nil, err
	}
	st := &record.Storage{Events: n, EventBytes: size}
	switch {
	case r.blobSizes != nil:
		st.BlobBytes = r.blobSizes[id]
	case cur.Storage != nil:
		st.BlobBytes = cur.Storage.BlobBytes
	}
	return st, nil
}

// derive is the entry a session record says: its checkpoint decoded, or,
// when this build cannot, its stable members (the aliases).
func (r *reconciler) derive(ctx context.Context, cur record.Session) (record.IndexEntry, error) {
	agent := subjects.DefaultAgent
	if f := r.agents.fleet.Load(); f != nil {
		a, err := f.Agent(ctx, cur.Record.DeploymentID)
		if err != nil {
			return record.IndexEntry{}, err
		}
		agent = a
	}
	cp, err := wire.DecodeCheckpoint(cur.Record.Checkpoint)
	if err != nil {
		p, perr := wire.PeekCheckpoint(cur.Record.Checkpoint)
		if perr != nil {
			return record.IndexEntry{}, err
		}
		cp = wire.Checkpoint{SessionID: p.SessionID, Tokens: p.Tokens}
	}
	e := record.DeriveIndex(cur.Record, cur.Revision, cp, agent)
	e.Writer = "reconcile-" + r.cfg.ProcessID
	return e, nil
}

// reconcileKey checks one key of the index's stream: an entry is
// reconciled with its record; a posting its entry does not have is
// removed.
func (r *reconciler) reconcileKey(ctx context.Context, x *kv.Index, k string) bool {
	p, err := subjects.ParsePosting(k)
	if err != nil {
		if _, err := subjects.ParseIndexEntryKey(k); err == nil {
			return r.reconcileSession(ctx, x, k, false)
		}
		return false
	}
	e, _, err := x.Get(ctx, p.SessionID)
	switch {
	case errors.Is(err, record.ErrNotFound):
		if _, rerr := r.cfg.Store.GetSession(ctx, p.SessionID); rerr == nil {
			return r.reconcileSession(ctx, x, p.SessionID, false) // a record without its entry
		}
	case err != nil:
		return false
	case slices.Contains(kv.Postings(e), p):
		return false
	}
	// A posting younger than postingGrace may belong to an entry being
	// written (postings go first): it is left for a later run.
	if err := x.RemovePosting(ctx, p, postingGrace); err != nil {
		r.log.Debug("session index reconcile: remove posting", "posting", k, "err", err)
		return false
	}
	r.metrics.indexed.WithLabelValues("removed").Inc()
	return false
}
