package wire

import "testing"

// command.rejected: built from its typed body at data version 1, its data
// checked (commandId non-empty, seq positive, reason non-empty), and
// round-tripped through the event codec.
func TestCommandRejected(t *testing.T) {
	checkNewKind(t, CommandRejected{CommandID: "c5", Seq: 51, Reason: RejectAgentMismatch},
		`{"commandId":"c5","seq":51,"reason":"agent_mismatch"}`,
		CommandRejected{Seq: 51, Reason: RejectAgentMismatch},
		CommandRejected{CommandID: "c5", Reason: RejectAgentMismatch},
		CommandRejected{CommandID: "c5", Seq: 51})
}
