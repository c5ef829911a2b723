package record

import (
	"time"
	"unicode/utf8"

	"github.com/baton-rt/baton/subjects"
)

// The way out of a quarantine is an operator's request that an owner
// carries out (docs/architecture.md, "Asking a session for something"):
// the admin route writes the request into the record — allowed, since no
// run of a quarantined session is live — and an owner finishes it, the
// only writer of a session's events. The request is found without a live
// request by any owner's sweep (a quarantined record with Finish set), so
// a request made while no owner runs is carried out when one starts.

// MaxEndMessageBytes bounds an end's message (wire's bound on the
// terminate command's and session.ended's message).
const MaxEndMessageBytes = 256

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
	// EndedBy says who asked for an end: EndedByUser (the session's own
	// route, POST /v1/sessions/{id}/end) or EndedByAdmin (the admin route;
	// also a request without it, written before the member existed).
	// Message is the user's optional word on the end (at most 256 bytes).
	// Both go into the session.ended event the finisher appends.
	EndedBy string `json:"endedBy,omitempty"`
	Message string `json:"message,omitempty"`
	// Reason says why a delete was asked for (DeleteByUser, …).
	Reason string `json:"reason,omitempty"`
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

// Who asks for an end (FinishRequest.EndedBy).
const (
	EndedByUser  = "user"
	EndedByAdmin = "admin"
)

// Same reports whether g asks what f asks (a repeated request). Two ends
// ask the same whoever asked and whatever they said: the first one
// written is carried out, once.
func (f FinishRequest) Same(g FinishRequest) bool {
	return f.Op == g.Op && f.DeploymentID == g.DeploymentID && f.Force == g.Force
}

// Requester is who asked for an end: EndedBy, EndedByAdmin when unset.
func (f FinishRequest) Requester() string {
	if f.EndedBy == "" {
		return EndedByAdmin
	}
	return f.EndedBy
}

// RequestFinish writes a request f into a quarantined record — or an end
// into the record of a session no owner of its deployment runs (see
// finishable):
// nothing else changes but the writer stamp (f.By, counter 0), which
// settles an uncertain write. A record that already holds the same request
// is returned as it is; one that holds another refuses.
func RequestFinish(r SessionRecord, f FinishRequest) (SessionRecord, error) {
	if err := finishable("request finish", r, f.Op); err != nil {
		return SessionRecord{}, err
	}
	switch f.Op {
	case FinishEnd:
		f.DeploymentID, f.Force = "", false
		if f.EndedBy != "" && f.EndedBy != EndedByUser && f.EndedBy != EndedByAdmin {
			return SessionRecord{}, invalid("end of %s: endedBy %q is not %s or %s", r.SessionID, f.EndedBy, EndedByUser, EndedByAdmin)
		}
		if len(f.Message) > MaxEndMessageBytes || !utf8.ValidString(f.Message) {
			return SessionRecord{}, invalid("end of %s: the message is more than %d bytes or not UTF-8", r.SessionID, MaxEndMessageBytes)
		}
	case FinishDelete:
		f.DeploymentID, f.Force, f.EndedBy, f.Message = "", false, "", ""
		if !validDeleteReason(f.Reason) {
			return SessionRecord{}, invalid("delete of %s: reason %q is not user, retention or parent", r.SessionID, f.Reason)
		}
	case FinishRetry:
		f.EndedBy, f.Message = "", ""
		if err := subjects.ValidateDeployment(f.DeploymentID); err != nil {
			return SessionRecord{}, invalid("retry of %s: %w", r.SessionID, err)
		}
	default:
		return SessionRecord{}, invalid("finish of %s: op %q is not end, retry or delete", r.SessionID, f.Op)
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
	if f.Op == FinishDelete {
		// No run holds an ended session: the delete is any owner's to claim.
		r.OwnerProcess, r.OwnerRunID = "", ""
	}
	r.Writer, r.WriteCounter = f.By, 0
	r.UpdatedAt = time.Time{}
	return r, nil
}

// ClaimFinish is an owner's claim of a session with a pending finish
// (FinishPending), for that finish only: the owner's process and run, the writer
// stamp run (counter 0). It is not an adoption and runs nothing: the
// deployment, the epoch (which counts the session's runs), the state and
// the request stay, and a claimer that dies leaves the request to the next
// one (its process no longer holds a lease). The revision CAS fences it.
func ClaimFinish(r SessionRecord, process, run string) (SessionRecord, error) {
	if !r.FinishPending() {
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

// FinishPending reports a record whose finish request waits for an
// owner: a quarantined one's end or retry, or the end of a session no
// owner of its deployment ran when it was asked (active, paused or
// hibernated: no claim may take it while the end is pending, Claim).
//
// A delete of an ended session is pending until its tombstone is written.
func (r SessionRecord) FinishPending() bool {
	if r.Finish == nil {
		return false
	}
	if r.Finish.Op == FinishDelete {
		return deletable(r)
	}
	return r.Quarantined() || r.Finish.Op == FinishEnd && orphanEndable(r.State)
}

// deletable: an ended session that is not deleted yet.
func deletable(r SessionRecord) bool { return r.State == StateEnded && r.Deleted == nil }

// orphanEndable: the states from which a session no owner runs may be
// ended by the finisher (RequestFinish of an end).
func orphanEndable(s State) bool {
	return s == StateActive || s == StatePaused || s == StateHibernated
}

// finishable refuses a finish request where no owner may carry it out: a
// retry of a session that is not quarantined, an end of one that is not
// quarantined, active, paused or hibernated (ended, mid-handoff). The end
// of a session that is not quarantined is the caller's to justify: only
// when no owner of its deployment is live (docs/architecture.md, the
// intent rule); the revision CAS makes a claim that lands first win.
func finishable(t string, r SessionRecord, op string) error {
	if op == FinishDelete {
		switch {
		case r.IsDeleted():
			return refuse(t, r, "the session is deleted")
		case r.State != StateEnded:
			return refuse(t, r, "the session is %s: only an ended session is deleted", r.State)
		}
		return nil
	}
	if r.Quarantined() || op == FinishEnd && orphanEndable(r.State) {
		return nil
	}
	if op == FinishEnd {
		return refuse(t, r, "the session is %s: only a quarantined, active, paused or hibernated one is ended by a finisher", r.State)
	}
	return inQuarantine(t, r)
}
