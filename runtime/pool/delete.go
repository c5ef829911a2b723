package pool

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/jsport"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// A session's delete (docs/api.md, "Deleting a session"): a finish of an
// ended session (record.FinishDelete), carried out by whichever owner
// claims it — any deployment's, since nothing of the session's agent
// runs. It removes, each step idempotent so a delete that died half way
// is repeated whole by the next claimant: its ended children (deleted
// the same way), its blobs (the inventory's, and those its last
// checkpoint names), the history segments no other session refers to,
// its events, its journal entries and idempotency receipts, its commands
// and timer schedules, its inbox consumer and its index entry; then it
// writes the record's tombstone and purges the record's older revisions.
// Kept on purpose: the tombstone (the ID answers 410 deleted and is never
// created again) and the address hooks' tombstones.

// eraser is what a delete removes with, beside the finisher's own parts.
type eraser struct {
	kv    kv.Eraser
	blobs jsport.Blobs
	inv   func() *kv.Inventory
	index func() *kv.Index
	state func() jetstream.ObjectStore
}

// maxDeleteDepth bounds the generations of children a delete follows.
const maxDeleteDepth = 8

// finishDelete deletes the claimed ended session cur and its ended
// children, and writes its tombstone.
func (o *finisher) finishDelete(ctx context.Context, cur record.Session, depth int) (protocol.FinishReply, error) {
	rec := cur.Record
	id := rec.SessionID
	rep := protocol.FinishReply{SessionID: id, Outcome: protocol.FinishDeleted, DeploymentID: rec.DeploymentID}
	cp, cperr := wire.DecodeCheckpoint(rec.Checkpoint)
	if depth < maxDeleteDepth {
		rep.ChildrenDeleted = o.deleteChildren(ctx, id, cp, depth)
	}
	removed, err := o.erase(ctx, rec, cp, cperr == nil)
	if err != nil {
		return protocol.FinishReply{}, fmt.Errorf("delete of session %s (an owner's sweep repeats it): %w", id, err)
	}
	tomb, err := record.Tombstone(rec, rec.OwnerRunID, o.now(), removed)
	if err != nil {
		return protocol.FinishReply{}, err
	}
	rev, err := o.out.casRecord(ctx, tomb, cur.Revision)
	if err != nil {
		return protocol.FinishReply{}, fmt.Errorf("tombstone of session %s: %w", id, err)
	}
	if err := o.erasers.kv.RecordHistory(ctx, id); err != nil {
		o.log.Warn("delete: the record's older revisions were not purged", "session", id, "err", err)
	}
	if err := o.cfg.Store.RemoveDeletion(ctx, id); err != nil {
		o.log.Debug("delete: the delete index entry stays (a sweep removes it)", "session", id, "err", err)
	}
	rep.Revision = rev
	rep.Removed = &protocol.Removed{Events: removed.Events, Blobs: removed.Blobs, Bytes: removed.Bytes}
	o.metrics.deleted.WithLabelValues(rec.Finish.Reason).Inc()
	o.log.Info("deleted a session", "session", id, "reason", rec.Finish.Reason, "events", removed.Events,
		"blobs", removed.Blobs, "bytes", removed.Bytes, "children", len(rep.ChildrenDeleted))
	return rep, nil
}

// erase removes what session rec stored, but its record and hooks.
func (o *finisher) erase(ctx context.Context, rec record.SessionRecord, cp wire.Checkpoint, decoded bool) (record.Removed, error) {
	id := rec.SessionID
	var removed record.Removed
	x := o.erasers.index()
	if x == nil {
		return removed, errors.New("the session index is not open yet")
	}
	n, size, err := x.CountEvents(ctx, id)
	if err != nil {
		return removed, err
	}
	// The index first, while the events still tell its creation time.
	created, err := x.FirstEventTime(ctx, id)
	if err != nil && !errors.Is(err, record.ErrNotFound) {
		return removed, err
	}
	if err := x.Erase(ctx, id, created); err != nil {
		return removed, err
	}
	removed.Events, removed.Bytes = n, size
	blobs, bytes, err := o.eraseBlobs(ctx, id, cp)
	if err != nil {
		return removed, err
	}
	removed.Blobs, removed.Bytes = blobs, removed.Bytes+bytes
	e := o.erasers.kv
	steps := []func() error{
		func() error { return e.Events(ctx, id) },
		func() error { return e.Journal(ctx, id) },
		func() error { return e.Receipts(ctx, id) },
		func() error { return e.Schedules(ctx, id) },
		func() error { return e.Inbox(ctx, id, 0) },
	}
	if decoded {
		for _, alias := range cp.Tokens[min(1, len(cp.Tokens)):] {
			if tok, err := subjects.EncodeToken(alias); err == nil {
				steps = append(steps, func() error { return e.Inbox(ctx, tok, cp.Applied.Low) })
			}
		}
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return removed, err
		}
	}
	if rec.Consumer != "" {
		o.out.deleteConsumer(ctx, rec.Consumer)
	}
	return removed, nil
}

// eraseBlobs deletes session id's blobs — every one its inventory lists,
// and those its last checkpoint names (a blob stored before the inventory
// existed) — and the history segments it refers to that no other session
// does, then its inventory keys. It returns how many objects went and
// their bytes.
func (o *finisher) eraseBlobs(ctx context.Context, id string, cp wire.Checkpoint) (int, int64, error) {
	inv, obs := o.erasers.inv(), o.erasers.state()
	if inv == nil || obs == nil {
		return 0, 0, errors.New("the blob inventory or the state object store is not open yet")
	}
	var digests []string
	for _, pinned := range []bool{false, true} {
		d, err := inv.Owned(ctx, id, pinned)
		if err != nil {
			return 0, 0, err
		}
		digests = append(digests, d...)
	}
	digests = append(digests, session.CheckpointBlobs(cp)...)
	slices.Sort(digests)
	digests = slices.Compact(digests)
	count, bytes := 0, int64(0)
	for _, d := range digests {
		name := id + "/" + d
		info, err := obs.GetInfo(ctx, name)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			continue
		}
		if err != nil {
			return 0, 0, fmt.Errorf("blob %s: %w", name, err)
		}
		if err := obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return 0, 0, fmt.Errorf("delete blob %s: %w", name, err)
		}
		count, bytes = count+1, bytes+int64(info.Size)
	}
	segs, err := inv.Segments(ctx, id)
	if err != nil {
		return 0, 0, err
	}
	for _, d := range segs {
		deleted, size, err := session.CollectSegment(ctx, o.erasers.blobs, inv, id, d)
		if err != nil {
			return 0, 0, err
		}
		if deleted {
			count, bytes = count+1, bytes+size
		}
	}
	return count, bytes, inv.Forget(ctx, id)
}

// deleteChildren deletes the ended children of session id — those its
// checkpoint's handles name and those the session index lists under it —
// and returns the IDs it deleted. A child that has not ended yet is left:
// once its parent is gone it may be deleted alone.
func (o *finisher) deleteChildren(ctx context.Context, id string, cp wire.Checkpoint, depth int) []string {
	var ids []string
	for _, h := range cp.Handles {
		if h.ChildSessionID != "" {
			ids = append(ids, h.ChildSessionID)
		}
	}
	if x := o.erasers.index(); x != nil {
		for after := ""; ; {
			page, err := x.List(ctx, kv.IndexQuery{Parent: id}, after, 100)
			if err != nil {
				o.log.Debug("delete: children not listed from the index", "session", id, "err", err)
				break
			}
			for _, e := range page.Entries {
				ids = append(ids, e.SessionID)
			}
			if after = page.Next; after == "" {
				break
			}
		}
	}
	slices.Sort(ids)
	var deleted []string
	for _, child := range slices.Compact(ids) {
		if o.deleteChild(ctx, child, depth+1) {
			deleted = append(deleted, child)
		}
	}
	return deleted
}

// deleteChildAttempts bounds the tries of a child's delete against a
// record that moves on meanwhile (a late clean-up claim of the ended
// child, another delete's request).
const deleteChildAttempts = 4

// deleteChild asks for and carries out the delete of an ended child
// (reason parent), reporting whether it is deleted now. A child whose
// delete does not go through here stays in the delete index: a sweep
// deletes it.
func (o *finisher) deleteChild(ctx context.Context, id string, depth int) bool {
	if err := o.cfg.Store.AddDeletion(ctx, kv.Deletion{SessionID: id, Reason: record.DeleteByParent}); err != nil {
		return false
	}
	for try := range deleteChildAttempts {
		if try > 0 {
			select {
			case <-ctx.Done():
				return false
			case <-time.After(time.Duration(try) * 100 * time.Millisecond):
			}
		}
		done, final := o.deleteChildOnce(ctx, id, depth)
		if final {
			return done
		}
	}
	o.log.Warn("delete: a child not deleted now (an owner's sweep deletes it)", "child", id)
	return false
}

// deleteChildOnce is one try of deleteChild; final is false when the
// child's record moved on under it (try again).
func (o *finisher) deleteChildOnce(ctx context.Context, id string, depth int) (done, final bool) {
	cur, err := o.cfg.Store.LeaderSession(ctx, id)
	switch {
	case err != nil:
		return false, false
	case cur.Record.IsDeleted():
		return true, true
	case cur.Record.State != record.StateEnded:
		o.log.Info("delete: a child that has not ended is left", "child", id, "state", cur.Record.State)
		return false, true
	}
	if !cur.Record.FinishPending() {
		f := record.FinishRequest{Op: record.FinishDelete, Reason: record.DeleteByParent, By: "finish-" + newID(), At: o.now()}
		asked, err := record.RequestFinish(cur.Record, f)
		if err != nil {
			return false, true
		}
		rev, err := o.out.casRecord(ctx, asked, cur.Revision)
		if err != nil {
			return false, false
		}
		cur = record.Session{Record: asked, Revision: rev}
	}
	rep, err := o.claimAndFinish(ctx, cur, depth)
	if err != nil {
		o.log.Debug("delete: a child's delete did not go through", "child", id, "err", err)
		return false, false
	}
	return rep.Outcome == protocol.FinishDeleted, true
}
