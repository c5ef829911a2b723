package handoff

import (
	"fmt"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

// Trigger is the delivery (or move) that triggered the handoff.
type Trigger struct {
	CommandID string
	Seq       uint64 // its BATON_INBOX sequence
}

// Request is one handoff attempt, as the source's driver builds it when the
// machine emits runtime.Handoff.
type Request struct {
	HandoffID string // unique per attempt (a ULID); the idempotency key
	SessionID string
	SourceRun string // the source's owner run
	Source    string // the source's deployment
	Target    string // the exact target deployment
	Trigger   Trigger
	Tokens    []string       // the session's encoded inbox tokens (stable first)
	Record    record.Session // the record the source holds: active, its run, at Revision
}

func (r Request) validate() error {
	switch {
	case r.HandoffID == "":
		return fmt.Errorf("%w: empty handoff ID", ErrInvalid)
	case subjects.ValidateSessionID(r.SessionID) != nil:
		return fmt.Errorf("%w: %w", ErrInvalid, subjects.ValidateSessionID(r.SessionID))
	case r.SourceRun == "":
		return fmt.Errorf("%w: empty source run", ErrInvalid)
	case subjects.ValidateDeployment(r.Source) != nil:
		return fmt.Errorf("%w: source: %w", ErrInvalid, subjects.ValidateDeployment(r.Source))
	case subjects.ValidateDeployment(r.Target) != nil:
		return fmt.Errorf("%w: target: %w", ErrInvalid, subjects.ValidateDeployment(r.Target))
	case r.Target == r.Source:
		return fmt.Errorf("%w: target %q is the source deployment", ErrInvalid, r.Target)
	case r.Trigger.Seq == 0:
		return fmt.Errorf("%w: trigger without an inbox sequence", ErrInvalid)
	}
	if err := r.validateTokens(); err != nil {
		return err
	}
	return r.validateRecord()
}

func (r Request) validateTokens() error {
	if len(r.Tokens) == 0 {
		return fmt.Errorf("%w: no inbox tokens", ErrInvalid)
	}
	for _, t := range r.Tokens {
		if !subjects.ValidToken(t) {
			return fmt.Errorf("%w: token %q is not an encoded token", ErrInvalid, t)
		}
	}
	return nil
}

func (r Request) validateRecord() error {
	rec := r.Record.Record
	switch {
	case r.Record.Revision == 0:
		return fmt.Errorf("%w: record without a revision", ErrInvalid)
	case rec.SessionID != r.SessionID, rec.OwnerRunID != r.SourceRun, rec.DeploymentID != r.Source:
		return fmt.Errorf("%w: the record (session %s, run %s, deployment %s) is not held by the source",
			ErrInvalid, rec.SessionID, rec.OwnerRunID, rec.DeploymentID)
	case rec.State != record.StateActive:
		return fmt.Errorf("%w: record state %q (only an active session hands off)", ErrInvalid, rec.State)
	}
	return nil
}

// Classify says who holds the record s, relative to the handoff req. It is
// the only way the transaction interprets a read: ownership is the
// record's owner run and epoch, the handoff's progress its recorded
// outcome.
func Classify(req Request, s record.Session) Holder {
	rec := s.Record
	h := rec.Handoff
	ours := h != nil && h.ID == req.HandoffID
	if ours && h.Outcome == OutcomeCompleted && rec.DeploymentID == req.Target {
		return HolderTarget
	}
	if rec.SessionID != req.SessionID || rec.OwnerRunID != req.SourceRun || rec.Epoch != req.Record.Record.Epoch {
		return HolderOther
	}
	switch {
	case rec.State == record.StateHandoff && ours:
		return HolderStaged
	case rec.State == record.StateActive && ours && (h.Outcome == OutcomeFailed || h.Outcome == OutcomeAbandoned):
		return HolderReclaimed
	case rec.State == record.StateActive:
		return HolderSource
	}
	return HolderOther
}

// held reports whether the source still holds a record so classified.
func (h Holder) held() bool {
	return h == HolderSource || h == HolderStaged || h == HolderReclaimed
}
