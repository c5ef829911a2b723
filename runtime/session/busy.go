package session

import (
	"context"
	"fmt"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// The busy modes' durable state in a checkpoint (state version 9): the
// session's default mode, its open debounce window, and a live turn's
// Before (for a rollback) and journaled calls.

// toWireBusy sets cp's busy-mode members from snap.
func toWireBusy(cp *wire.Checkpoint, snap runtime.Snapshot) {
	cp.DefaultMode, cp.DefaultDebounceMs, cp.BusyModes = snap.DefaultMode, snap.DefaultDebounceMs, snap.BusyModes
	if w := snap.Debounce; w != nil {
		dw := &wire.DebounceWindow{OpenedAt: w.OpenedAt.UTC(), Until: w.Until.UTC(), TimerID: w.TimerID}
		for _, in := range w.Inputs { // a copy: blobStore.externalise edits the checkpoint's
			dw.Inputs = append(dw.Inputs, wire.CompactInput(in))
		}
		cp.Debounce = dw
	}
	if t := snap.Turn; t != nil && snap.BusyModes { // see runtime.Snapshot.BusyModes
		if b := t.Before; b != nil {
			cp.Turn.Before = &wire.TurnBefore{State: b.State, HistoryLen: b.HistoryLen}
		}
		cp.Turn.Calls = t.Calls
	}
}

// fromWireBusy sets snap's busy-mode members from cp (out-of-line content
// is read by blobStore.hydrateBusy).
func fromWireBusy(snap *runtime.Snapshot, cp wire.Checkpoint) {
	snap.DefaultMode, snap.DefaultDebounceMs, snap.BusyModes = cp.DefaultMode, cp.DefaultDebounceMs, cp.BusyModes
	if w := cp.Debounce; w != nil {
		rw := &runtime.Window{OpenedAt: w.OpenedAt, Until: w.Until, TimerID: w.TimerID}
		for _, in := range w.Inputs {
			rw.Inputs = append(rw.Inputs, wire.ExpandInput(in))
		}
		snap.Debounce = rw
	}
	if t := snap.Turn; t != nil {
		if b := cp.Turn.Before; b != nil {
			t.Before = &runtime.Before{State: b.State, HistoryLen: b.HistoryLen}
		}
		t.Calls = cp.Turn.Calls
	}
}

// externaliseBusy moves a live turn's Before state above
// wire.MaxInlineBytes and the window's long input texts to the session's
// blobs (the state's blob is the one the turn's first commit stored).
func (b *blobStore) externaliseBusy(ctx context.Context, cp *wire.Checkpoint) error {
	if bf := cp.Turn.Before; bf != nil && len(bf.State) > wire.MaxInlineBytes {
		ref, err := b.put(ctx, cp.SessionID, bf.State, false)
		if err != nil {
			return err
		}
		cp.Turn.Before = &wire.TurnBefore{StateRef: &ref, HistoryLen: bf.HistoryLen}
	}
	if w := cp.Debounce; w != nil {
		for i := range w.Inputs {
			if err := b.externaliseInput(ctx, cp.SessionID, &w.Inputs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// hydrateBusy reads the Before state and the window's inputs back.
func (b *blobStore) hydrateBusy(ctx context.Context, sessionID string, d *Checkpoint) error {
	if t := d.Snap.Turn; t != nil && t.Before != nil && d.beforeRef != nil {
		data, err := b.get(ctx, sessionID, *d.beforeRef)
		if err != nil {
			return fmt.Errorf("session: turn state of %s: %w", sessionID, err)
		}
		t.Before.State = data
	}
	if w := d.Snap.Debounce; w != nil {
		for i := range w.Inputs {
			if err := b.hydrateInput(ctx, sessionID, &w.Inputs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// addBusyRefs adds the blobs c's busy-mode members refer to.
func addBusyRefs(c wire.Checkpoint, add func(*wire.BlobRef)) {
	if b := c.Turn.Before; b != nil {
		add(b.StateRef)
	}
	if w := c.Debounce; w != nil {
		for _, in := range w.Inputs {
			add(in.TextRef)
			add(in.PayloadsRef)
		}
	}
}

// beforeRef is the out-of-line Before state of c's live turn, if any.
func beforeRef(c wire.Checkpoint) *wire.BlobRef {
	if b := c.Turn.Before; b != nil {
		return b.StateRef
	}
	return nil
}
