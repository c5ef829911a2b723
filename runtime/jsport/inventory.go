package jsport

import (
	"context"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime/session"
)

// Inventory is session.Inventory over a blob inventory opened later (the
// owner opens baton_blobs when it runs): Open returns it, nil until then,
// and every call before fails with ErrNotOpen.
type Inventory struct {
	Open func() *kv.Inventory
}

var (
	_ session.Inventory = Inventory{}
	_ session.Inventory = (*kv.Inventory)(nil)
)

func (v Inventory) inv() (*kv.Inventory, error) {
	if i := v.Open(); i != nil {
		return i, nil
	}
	return nil, ErrNotOpen
}

// Own records that sessionID owns the blob of digest.
func (v Inventory) Own(ctx context.Context, sessionID, digest string, pinned bool) error {
	i, err := v.inv()
	if err != nil {
		return err
	}
	return i.Own(ctx, sessionID, digest, pinned)
}

// Pinned reports whether an event of sessionID refers to digest.
func (v Inventory) Pinned(ctx context.Context, sessionID, digest string) (bool, error) {
	i, err := v.inv()
	if err != nil {
		return false, err
	}
	return i.Pinned(ctx, sessionID, digest)
}

// Owned lists the digests sessionID owns, pinned or not.
func (v Inventory) Owned(ctx context.Context, sessionID string, pinned bool) ([]string, error) {
	i, err := v.inv()
	if err != nil {
		return nil, err
	}
	return i.Owned(ctx, sessionID, pinned)
}

// Disown removes sessionID's unpinned record of digest.
func (v Inventory) Disown(ctx context.Context, sessionID, digest string) error {
	i, err := v.inv()
	if err != nil {
		return err
	}
	return i.Disown(ctx, sessionID, digest)
}

// RefSegment records that sessionID refers to history segment digest.
func (v Inventory) RefSegment(ctx context.Context, sessionID, digest string) error {
	i, err := v.inv()
	if err != nil {
		return err
	}
	return i.RefSegment(ctx, sessionID, digest)
}

// Referrers lists the sessions that refer to segment digest.
func (v Inventory) Referrers(ctx context.Context, digest string) ([]string, error) {
	i, err := v.inv()
	if err != nil {
		return nil, err
	}
	return i.Referrers(ctx, digest)
}

// KeepSegment records that segment digest is never deleted.
func (v Inventory) KeepSegment(ctx context.Context, digest string) error {
	i, err := v.inv()
	if err != nil {
		return err
	}
	return i.KeepSegment(ctx, digest)
}

// Unref removes sessionID's reference to segment digest.
func (v Inventory) Unref(ctx context.Context, sessionID, digest string) error {
	i, err := v.inv()
	if err != nil {
		return err
	}
	return i.Unref(ctx, sessionID, digest)
}
