package wire

import "testing"

// turn.step_retried: built from its typed body at data version 1, its data
// checked (turnId and code non-empty, step positive, attempt 2 or more),
// and round-tripped through the event codec.
func TestTurnStepRetried(t *testing.T) {
	checkNewKind(t, TurnStepRetried{TurnID: "t1", Step: 2, Attempt: 2, Code: CodeAgentTimeout},
		`{"turnId":"t1","step":2,"attempt":2,"code":"agent_timeout"}`,
		TurnStepRetried{Step: 2, Attempt: 2, Code: CodeAgentTimeout},
		TurnStepRetried{TurnID: "t1", Attempt: 2, Code: CodeAgentTimeout},
		TurnStepRetried{TurnID: "t1", Step: 2, Attempt: 1, Code: CodeAgentTimeout},
		TurnStepRetried{TurnID: "t1", Step: 2, Code: CodeAgentTimeout},
		TurnStepRetried{TurnID: "t1", Step: 2, Attempt: 3})
}
