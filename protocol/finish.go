package protocol

import "encoding/json"

// FinishRequest is the body of a request on baton.deploy.<deploymentId>.finish
// (the queue group of that deployment's pool) or baton.finish (every owner
// of every deployment, one queue group): carry out the operator's finish
// that the quarantined session's record holds (record.FinishRequest). The
// request only speeds the finish up: owners find a pending one in their
// sweeps. An owner on baton.finish finishes a session of another
// deployment only when no owner of that deployment answers.
type FinishRequest struct {
	SessionID string `json:"sessionId"`
}

// FinishReply answers a FinishRequest once the finish is carried out, or
// with Error (CodeBadRequest, CodeUnavailable, CodeConflict, CodeRefused:
// no finish is pending) when it is not.
type FinishReply struct {
	SessionID string        `json:"sessionId"`
	Outcome   FinishOutcome `json:"outcome,omitempty"`
	// DeploymentID: an end's session deployment; a retry's target.
	DeploymentID string `json:"deploymentId,omitempty"`
	// FromDeploymentID: a retry's quarantined deployment.
	FromDeploymentID string `json:"fromDeploymentId,omitempty"`
	Force            bool   `json:"force,omitempty"`
	EventSeq         uint64 `json:"eventSeq,omitempty"` // seq of session.ended or session.retried
	Revision         uint64 `json:"revision,omitempty"` // the record's revision after the finish
	// End: the addresses tombstoned and the children sent `end`; How says
	// whether the machine ended the family (machine) or the record and the
	// parent → child index did (record), and why.
	Tombstoned    []string `json:"tombstoned,omitempty"`
	ChildrenEnded []string `json:"childrenEnded,omitempty"`
	How           string   `json:"how,omitempty"`
	// Retry: the target pool's answer to the wake that boots it.
	WakeOutcome string `json:"wakeOutcome,omitempty"`
	WakeProcess string `json:"wakeProcess,omitempty"`
	WakeError   string `json:"wakeError,omitempty"`
	// Delete: what it removed, and the ended children deleted with it.
	Removed         *Removed    `json:"removed,omitempty"`
	ChildrenDeleted []string    `json:"childrenDeleted,omitempty"`
	Error           *ReplyError `json:"error,omitempty"`
}

// Removed is what a delete removed: the session's events, its blobs
// (history segments included) and the bytes of both.
type Removed struct {
	Events uint64 `json:"events"`
	Blobs  int    `json:"blobs"`
	Bytes  int64  `json:"bytes"`
}

// FinishOutcome is what a finish did.
type FinishOutcome string

// Finish outcomes.
const (
	FinishEnded   FinishOutcome = "ended"   // session.ended {terminated} appended, addresses tombstoned
	FinishRetried FinishOutcome = "retried" // session.retried appended, the target woken
	FinishDeleted FinishOutcome = "deleted" // what the session stored removed, its tombstone written
)

// DecodeFinish decodes a finish request; unknown fields are ignored.
// Errors wrap ErrMalformed.
func DecodeFinish(data []byte) (FinishRequest, error) {
	var req FinishRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return FinishRequest{}, malformed("finish request", err)
	}
	return req, nil
}
