package pool

import (
	"context"
	"fmt"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/wire"
)

// Nothing committed is dropped by a quarantine (docs/driver.md,
// "Quarantine"): the committed-but-unpublished events of the checkpoint
// are appended before session.quarantined, also when no build can decode
// the checkpoint. Its outbox is then read leniently (wire.PeekOutbox:
// envelopes validated, data passed through, as every re-publication of an
// outbox does); when it cannot be read at all, the raw checkpoint is kept
// in the object store and session.quarantined says so (data version 2:
// outboxLost, checkpointRef).

// committed is what a quarantined checkpoint committed that the stream may
// lack: its outbox, in seq order, and the seq it ends at (0: not known,
// the next event follows the stream). lost, when set, is the reference of
// the raw checkpoint kept because (part of) its outbox could not be read.
type committed struct {
	outbox   []wire.Event
	eventSeq uint64
	lost     *wire.BlobRef
}

// committedOf is d's committed outbox when the checkpoint could be
// decoded; else the outbox read leniently from the record's checkpoint.
func (o *outside) committedOf(ctx context.Context, rec record.SessionRecord, d *session.Checkpoint) (committed, error) {
	if d != nil {
		return committed{outbox: d.Outbox, eventSeq: d.Snap.EventSeq}, nil
	}
	outbox, err := wire.PeekOutbox(rec.Checkpoint, rec.SessionID)
	c := committed{outbox: outbox}
	if err == nil {
		return c, nil
	}
	ref, perr := o.keepCheckpoint(ctx, rec)
	if perr != nil {
		return committed{}, perr
	}
	o.log.Warn("quarantine: the unreadable checkpoint's outbox cannot be read; its raw bytes are kept",
		"session", rec.SessionID, "readable_events", len(outbox), "checkpoint_digest", ref.Digest, "err", err)
	c.lost = &ref
	return c, nil
}

// keepCheckpoint stores the record's raw checkpoint in the object store as
// a session blob (wire.BlobName of its reference; content-addressed, so a
// repeated quarantine attempt writes the same object).
func (o *outside) keepCheckpoint(ctx context.Context, rec record.SessionRecord) (wire.BlobRef, error) {
	ref := wire.NewBlobRef(rec.Checkpoint)
	if err := o.inv.Own(ctx, rec.SessionID, ref.Digest, true); err != nil {
		return wire.BlobRef{}, fmt.Errorf("keep the unreadable checkpoint: record it: %w", err)
	}
	if err := o.blobs.Put(ctx, wire.BlobName(rec.SessionID, ref), rec.Checkpoint); err != nil {
		return wire.BlobRef{}, fmt.Errorf("keep the unreadable checkpoint: %w", err)
	}
	return ref, nil
}
