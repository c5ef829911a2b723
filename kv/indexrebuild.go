package kv

import (
	"context"
	"time"

	"github.com/baton-rt/baton/subjects"
)

// The rebuild request of the session index: one key of the index bucket,
// written by the admin route and claimed by one owner's reconciler.

// IndexRebuild is a request to rebuild the session index, as the admin
// route writes it. One owner process claims it (ClaimedBy, by CAS) and
// walks every record and every index key once, repairing every entry and
// posting; another claims it again if the claimant's lease dies first.
type IndexRebuild struct {
	RebuildID   string    `json:"rebuildId"`
	RequestedAt time.Time `json:"requestedAt"`
	By          string    `json:"by,omitempty"`
	ClaimedBy   string    `json:"claimedBy,omitempty"`
	ClaimedAt   time.Time `json:"claimedAt,omitzero"`
	DoneAt      time.Time `json:"doneAt,omitzero"`
	Sessions    int       `json:"sessions,omitempty"` // sessions checked, once done
}

// RequestRebuild writes a rebuild request (the newest one wins).
func (x *Index) RequestRebuild(ctx context.Context, r IndexRebuild) error {
	data, err := x.b.encode(subjects.IndexRebuildKey, r)
	if err != nil {
		return err
	}
	_, err = x.b.kv.Put(ctx, subjects.IndexRebuildKey, data)
	return mapErr("put", subjects.IndexRebuildKey, err)
}

// Rebuild reads the last rebuild request and its revision
// (record.ErrNotFound: none).
func (x *Index) Rebuild(ctx context.Context) (IndexRebuild, uint64, error) {
	e, err := x.b.get(ctx, subjects.IndexRebuildKey)
	if err != nil {
		return IndexRebuild{}, 0, err
	}
	var r IndexRebuild
	return r, e.rev, decode(e, &r)
}

// UpdateRebuild writes r if the request is still at rev (a claim, a
// finish); a lost race is record.ErrConflict.
func (x *Index) UpdateRebuild(ctx context.Context, r IndexRebuild, rev uint64) (uint64, error) {
	data, err := x.b.encode(subjects.IndexRebuildKey, r)
	if err != nil {
		return 0, err
	}
	n, err := x.b.kv.Update(ctx, subjects.IndexRebuildKey, data, rev)
	return n, mapErr("update", subjects.IndexRebuildKey, err)
}
