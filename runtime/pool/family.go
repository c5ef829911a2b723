package pool

import (
	"context"
	"errors"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/wire"
)

// The family of a session an operator ended learns of the end the way the
// session's own end tells it (docs/runtime.md, R13), from one place: the
// machine (runtime.Terminate). Each open handle's child gets `end` (it ends
// with reason closed) and a live delegated turn is reported cancelled to
// the parent, with the IDs the machine always uses.

// How the family of an ended session was found (FinishReply.How).
const (
	// familyMachine: the checkpoint decodes; the machine restored from it
	// ended the family. The session's own end is record-only
	// (record.Terminate): no checkpoint state version expresses the reason
	// terminated.
	familyMachine = "machine"
	// familyIndex: the checkpoint does not decode here; the open children
	// are found through the parent → child index (kv.Store.Children), the
	// parent is not told, and the end is record-only.
	familyIndex = "index"
)

// endFamily sends the commands of the ended session's family (each tried
// once, logged on failure: the child's own sweep and timeout bound what a
// lost one costs) and returns the children sent `end` and how the family
// was found.
func (o *finisher) endFamily(ctx context.Context, rec record.SessionRecord) ([]string, string) {
	id := rec.SessionID
	snap, how := o.familyOf(ctx, rec)
	cfg := runtime.Config{SessionID: id, RunID: rec.Writer, Deployment: rec.DeploymentID}
	sends, err := runtime.Terminate(cfg, snap, o.now().UTC())
	if err != nil {
		o.log.Warn("finish: the family of an ended session", "session", id, "err", err)
		return nil, how
	}
	var ended []string
	for _, s := range sends {
		if !o.receiverLive(ctx, s.SessionID) {
			continue
		}
		if err := o.send.trySend(ctx, id, s); err != nil {
			o.log.Warn("finish: a command for the ended session's family was not sent", "session", id, "to", s.SessionID,
				"kind", s.Command.Kind, "err", err)
			continue
		}
		if s.Command.Kind == wire.KindEnd {
			ended = append(ended, s.SessionID)
		}
	}
	return ended, how
}

// familyOf is the snapshot the family end starts from: the checkpoint's,
// or one naming only the open children the index finds.
func (o *finisher) familyOf(ctx context.Context, rec record.SessionRecord) (runtime.Snapshot, string) {
	if d, err := session.DecodeCheckpoint(rec.Checkpoint); err == nil {
		return d.Snap, familyMachine
	}
	kids, err := o.cfg.Store.Children(ctx, rec.SessionID)
	if err != nil {
		o.log.Warn("finish: the children of a session whose checkpoint does not decode", "session", rec.SessionID, "err", err)
	}
	var snap runtime.Snapshot
	for _, c := range kids {
		if !c.Ended {
			snap.Handles = append(snap.Handles, runtime.Handle{Handle: c.Handle, Generation: c.Generation, ChildSessionID: c.SessionID})
		}
	}
	return snap, familyIndex
}

// receiverLive reports a session that exists and has not ended.
func (o *finisher) receiverLive(ctx context.Context, id string) bool {
	cur, err := o.cfg.Store.GetSession(ctx, id)
	if errors.Is(err, record.ErrNotFound) {
		return false
	}
	return err != nil || cur.Record.State != record.StateEnded
}
