package wire

import (
	"encoding/json"
	"errors"
	"fmt"
)

// session.quarantined's data version 2 (outboxLost, checkpointRef) and the
// lenient read of an unreadable checkpoint's outbox the quarantine
// appends before it (PeekOutbox).

// SessionQuarantinedV2 is data version 2 of session.quarantined: version
// 1's members plus OutboxLost (always true: the quarantined checkpoint's
// committed-but-unpublished events could not be read, so they are not on
// the stream) and CheckpointRef, the raw checkpoint as the quarantine found
// it, kept in the object store under BlobName(sessionID, CheckpointRef).
// It is written only for a lost outbox (LowestSessionQuarantined).
type SessionQuarantinedV2 struct {
	Attempts      int     `json:"attempts" jsonschema:"minimum=1"`
	Error         string  `json:"error" jsonschema:"minLength=1"`
	DeploymentID  string  `json:"deploymentId" jsonschema:"minLength=1"`
	OutboxLost    bool    `json:"outboxLost"`
	CheckpointRef BlobRef `json:"checkpointRef"`
}

func (SessionQuarantinedV2) EventKind() string { return EventSessionQuarantined }

// DataVersion is the data version a SessionQuarantinedV2 is recorded at.
func (SessionQuarantinedV2) DataVersion() int { return 2 }

// LowestSessionQuarantined is session.quarantined's body at the lowest data
// version that expresses it: version 1 unless lost names the stored raw
// checkpoint of an outbox that could not be read (version 2).
func LowestSessionQuarantined(q SessionQuarantined, lost *BlobRef) EventBody {
	if lost == nil {
		return q
	}
	return SessionQuarantinedV2{Attempts: q.Attempts, Error: q.Error, DeploymentID: q.DeploymentID,
		OutboxLost: true, CheckpointRef: *lost}
}

// registerQuarantineEvents adds the events appended outside a commit by
// the quarantine and its way out to r: session.quarantined (data versions
// 1 and 2) and session.retried.
func registerQuarantineEvents(r *EventRegistry) error {
	return errors.Join(
		registerBuiltin(r, EventSessionQuarantined, func(d SessionQuarantined) error {
			if d.Attempts < 1 {
				return errors.New("attempts must be positive")
			}
			return all(nonEmpty("error", d.Error), validDeployment(d.DeploymentID))
		}),
		registerBuiltinV(r, EventSessionQuarantined, 2, func(d SessionQuarantinedV2) error {
			if d.Attempts < 1 {
				return errors.New("attempts must be positive")
			}
			if !d.OutboxLost {
				return errors.New("data version 2 is written only for a lost outbox (outboxLost true)")
			}
			return all(nonEmpty("error", d.Error), validDeployment(d.DeploymentID), d.CheckpointRef.Validate())
		}),
		registerBuiltin(r, EventSessionRetried, func(d SessionRetried) error { return validDeployment(d.DeploymentID) }),
	)
}

// PeekOutbox reads the committed outbox of a checkpoint this build cannot
// decode (VERSIONING.md: re-publishing an outbox never re-validates event
// data strictly): only the member outbox, each event's envelope validated
// and its data passed through (DecodeEvent without a registry), nothing
// else of the checkpoint interpreted. It returns the events it could read,
// in order, and ErrInvalid when anything of the outbox could not be read:
// the checkpoint is not a JSON object, outbox is not a list, or an event's
// envelope is invalid or names another session than sessionID. A
// checkpoint without an outbox has none (nil, nil). Never a basis for
// running a session: for appending what its checkpoint committed before
// it is quarantined.
func PeekOutbox(b []byte, sessionID string) ([]Event, error) {
	var doc struct {
		Outbox json.RawMessage `json:"outbox"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, stateFail(0, ErrInvalid, "not a checkpoint object: %v", err)
	}
	if len(doc.Outbox) == 0 || string(doc.Outbox) == "null" {
		return nil, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(doc.Outbox, &raws); err != nil {
		return nil, stateFail(0, ErrInvalid, "outbox: %v", err)
	}
	var out []Event
	var errs []error
	for i, raw := range raws {
		e, err := DecodeEvent(nil, raw)
		if err == nil && e.SessionID != sessionID {
			err = fmt.Errorf("%w: event of session %q", ErrInvalid, e.SessionID)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("outbox[%d]: %w", i, err))
			continue
		}
		out = append(out, e)
	}
	if len(errs) > 0 {
		return out, stateFail(0, ErrInvalid, "%v", errors.Join(errs...))
	}
	return out, nil
}
