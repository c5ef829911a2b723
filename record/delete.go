package record

import "time"

// A session's delete (docs/api.md, "Deleting a session"): the record of an
// ended session gets a delete request (RequestFinish with FinishDelete),
// an owner claims it for the delete (ClaimFinish) and removes what the
// session stored, then writes the record's tombstone (Tombstone). The
// tombstone keeps the session ID taken for good (a create of it fails)
// and answers 410 deleted.

// FinishDelete is the finish operation that deletes an ended session.
const FinishDelete = "delete"

// Why a session is deleted (FinishRequest.Reason, the reason label of
// baton_owner_sessions_deleted_total).
const (
	DeleteByUser      = "user"      // DELETE /v1/sessions/{id}, or the NATS delete
	DeleteByRetention = "retention" // the owners' --retain-ended
	DeleteByParent    = "parent"    // its parent's delete
)

// validDeleteReason reports one of the three reasons.
func validDeleteReason(r string) bool {
	switch r {
	case DeleteByUser, DeleteByRetention, DeleteByParent:
		return true
	}
	return false
}

// Removed is what a delete removed: the session's events, its blobs and
// the bytes of both (a delete's report).
type Removed struct {
	Events uint64 `json:"events"`
	Blobs  int    `json:"blobs"`
	Bytes  int64  `json:"bytes"`
}

// Deletion is the tombstone of a deleted session (SessionRecord.Deleted):
// when, why and what it removed.
type Deletion struct {
	At      time.Time `json:"at"`
	Reason  string    `json:"reason"`
	Removed Removed   `json:"removed"`
	// Extra: the members this build does not know (SessionRecord.Extra).
	Extra Members `json:"-"`
}

type deletion Deletion

// MarshalJSON encodes the tombstone with the members it kept.
func (d Deletion) MarshalJSON() ([]byte, error) { return encodeKeeping(deletion(d), d.Extra) }

// UnmarshalJSON decodes the tombstone and keeps unknown members in Extra.
func (d *Deletion) UnmarshalJSON(data []byte) error {
	return decodeInto(data, (*deletion)(d), &d.Extra)
}

// IsDeleted reports a deleted session's tombstone.
func (r SessionRecord) IsDeleted() bool { return r.Deleted != nil }

// Tombstone is the record a delete leaves, written by the owner that
// claimed the delete (its claim is the fence): state ended, the session
// and deployment IDs, the epoch and the tombstone; no checkpoint, no
// request, no floor event. Builds before it read an ended record with no
// checkpoint (410 gone).
func Tombstone(r SessionRecord, by string, at time.Time, removed Removed) (SessionRecord, error) {
	if f := r.Finish; f == nil || f.Op != FinishDelete || r.State != StateEnded {
		return SessionRecord{}, refuse("tombstone", r, "no delete is pending")
	}
	if by == "" || r.OwnerRunID == "" || by != r.OwnerRunID {
		return SessionRecord{}, refuse("tombstone", r, "the delete is claimed by %q, not %q", r.OwnerRunID, by)
	}
	return SessionRecord{
		SessionID:    r.SessionID,
		DeploymentID: r.DeploymentID,
		Epoch:        r.Epoch,
		State:        StateEnded,
		Writer:       by,
		Deleted:      &Deletion{At: at.UTC(), Reason: r.Finish.Reason, Removed: removed},
	}, nil
}
