package wire

// command.rejected: the record of a command the owner decoded but refused
// to apply, written in place of its command.applied.

// Reasons of command.rejected (TurnInput.Refused).
const (
	// RejectAgentMismatch: a handoff trigger (a delivery or a move)
	// stamped by a deployment of another agent.
	RejectAgentMismatch = "agent_mismatch"
	// RejectTooManyTags: a tag command whose merge would leave the
	// session more than MaxTags tags; its tags stay as they were.
	RejectTooManyTags = "too_many_tags"
)

// CommandRejected is emitted instead of command.applied for a command the
// owner decoded but refused to apply (TurnInput.Refused; Reason is one of
// the Reject… reasons): the command is processed — its sequence is in the
// applied set, so a redelivery is a duplicate — and has no other effect.
// Reason is not an enumeration, so a later reason needs no new data
// version.
type CommandRejected struct {
	CommandID string `json:"commandId" jsonschema:"minLength=1"`
	Seq       uint64 `json:"seq" jsonschema:"minimum=1"`
	Reason    string `json:"reason" jsonschema:"minLength=1"`
}

// registerCommandRejected adds command.rejected (data version 1) to r.
func registerCommandRejected(r *EventRegistry) error {
	return registerBuiltin(r, EventCommandRejected, func(d CommandRejected) error {
		return all(nonEmpty("commandId", d.CommandID), positive("seq", d.Seq), nonEmpty("reason", d.Reason))
	})
}
