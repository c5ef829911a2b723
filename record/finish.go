package record

import (
	"time"

	"github.com/baton-rt/baton/subjects"
)

// The way out of a quarantine is an operator's request that an owner
// carries out (docs/architecture.md, "Asking a session for something"):
// the admin route writes the request into the record — allowed, since no
// run of a quarantined session is live — and an owner finishes it, the
// only writer of a session's events. The request is found without a live
// request by any owner's sweep (a quarantined record with Finish set), so
// a request made while no owner runs is carried out when one starts.

// Finish operations.
const (
	FinishEnd   = "end"   // end the session (session.ended {terminated})
	FinishRetry = "retry" // boot it again, here or on DeploymentID
)

// FinishRequest is an operator's pending request to finish a quarantined
// session: end it, or retry it (on DeploymentID, with Force to cancel
// live waits there). Builds before it drop the member on their writes
// (docs/wire.md, "The session record"); only an operator route writes a
// quarantined record, so none of theirs meets it.
type FinishRequest struct {
	Op           string    `json:"op"`
	DeploymentID string    `json:"deploymentId,omitempty"` // retry: where it boots
	Force        bool      `json:"force,omitempty"`        // retry: cancel live waits there
	By           string    `json:"by"`                     // the writer stamp of the request
	At           time.Time `json:"at"`
	// Extra: the members this build does not know (SessionRecord.Extra).
	Extra Members `json:"-"`
}

type finishRequest FinishRequest

// MarshalJSON encodes the request with the members it kept.
func (f FinishRequest) MarshalJSON() ([]byte, error) {
	return encodeKeeping(finishRequest(f), f.Extra)
}

// UnmarshalJSON decodes the request and keeps unknown members in Extra.
func (f *FinishRequest) UnmarshalJSON(data []byte) error {
	return decodeInto(data, (*finishRequest)(f), &f.Extra)
}

// Same reports whether g asks what f asks (a repeated request).
func (f FinishRequest) Same(g FinishRequest) bool {
	return f.Op == g.Op && f.DeploymentID == g.DeploymentID && f.Force == g.Force
}

// RequestFinish writes an operator's request f into a quarantined record:
// nothing else changes but the writer stamp (f.By, counter 0), which
// settles an uncertain write. A record that already holds the same request
// is returned as it is; one that holds another refuses.
func RequestFinish(r SessionRecord, f FinishRequest) (SessionRecord, error) {
	if err := inQuarantine("request finish", r); err != nil {
		return SessionRecord{}, err
	}
	switch f.Op {
	case FinishEnd:
		f.DeploymentID, f.Force = "", false
	case FinishRetry:
		if err := subjects.ValidateDeployment(f.DeploymentID); err != nil {
			return SessionRecord{}, invalid("retry of %s: %w", r.SessionID, err)
		}
	default:
		return SessionRecord{}, invalid("finish of %s: op %q is not end or retry", r.SessionID, f.Op)
	}
	if f.By == "" {
		return SessionRecord{}, invalid("finish of %s: the request needs its writer", r.SessionID)
	}
	if p := r.Finish; p != nil {
		if p.Same(f) {
			return r, nil
		}
		return SessionRecord{}, refuse("request finish", r, "a %s is pending", p.Op)
	}
	r.Finish = &f
	r.Writer, r.WriteCounter = f.By, 0
	r.UpdatedAt = time.Time{}
	return r, nil
}

// ClaimFinish is an owner's claim of a quarantined session with a pending
// finish, for that finish only: the owner's process and run, the writer
// stamp run (counter 0). It is not an adoption and runs nothing: the
// deployment, the epoch (which counts the session's runs), the state and
// the request stay, and a claimer that dies leaves the request to the next
// one (its process no longer holds a lease). The revision CAS fences it.
func ClaimFinish(r SessionRecord, process, run string) (SessionRecord, error) {
	if err := inQuarantine("claim finish", r); err != nil {
		return SessionRecord{}, err
	}
	if r.Finish == nil {
		return SessionRecord{}, refuse("claim finish", r, "no finish is pending")
	}
	if process == "" || run == "" {
		return SessionRecord{}, invalid("claim finish of %s: process and run are required", r.SessionID)
	}
	r.OwnerProcess, r.OwnerRunID = process, run
	r.Writer, r.WriteCounter = run, 0
	r.UpdatedAt = time.Time{}
	return r, nil
}

// FinishPending reports a quarantined record whose operator request waits
// for an owner.
func (r SessionRecord) FinishPending() bool { return r.Quarantined() && r.Finish != nil }
