package record

import (
	"time"

	"github.com/baton-rt/baton/subjects"
)

// Marker is the value of baton_hooks/handoff.<sessionID>: a handoff in
// progress (docs/handoff.md, step 1). At most one per session (create-only);
// removed once the transfer activated or was recovered.
type Marker struct {
	HandoffID  string `json:"handoffId"`
	SessionID  string `json:"sessionId"`
	SourceRun  string `json:"sourceRun"`  // owner run that staged the handoff
	Target     string `json:"target"`     // target deployment
	TriggerSeq uint64 `json:"triggerSeq"` // inbox sequence of the triggering delivery
	// TriggerCommandID is the trigger's command ID (handoff.started); empty
	// in markers written before it was recorded.
	TriggerCommandID string    `json:"triggerCommandId,omitempty"`
	StagedRevision   uint64    `json:"stagedRevision"` // session-record revision after staging
	CreatedAt        time.Time `json:"createdAt"`
	Outcome          string    `json:"outcome,omitempty"`
}

// Validate checks what a marker needs before it is written.
func (m Marker) Validate() error {
	if err := subjects.ValidateSessionID(m.SessionID); err != nil {
		return invalid("handoff marker: %w", err)
	}
	if m.HandoffID == "" {
		return invalid("handoff marker %s: empty handoff ID", m.SessionID)
	}
	if err := subjects.ValidateDeployment(m.Target); err != nil {
		return invalid("handoff marker %s: target: %w", m.SessionID, err)
	}
	return nil
}
