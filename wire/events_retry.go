package wire

import "fmt"

// turn.step_retried: a step that failed for a reason outside the agent's
// control runs again.

// TurnStepRetried records that step Step of turn TurnID failed with Code
// (agent_timeout, agent_unavailable or agent_retryable) and runs again as
// attempt Attempt (2 for the first retry). It is committed before the
// retry starts; the failed attempt's events and state were dropped, and
// its journaled calls are replayed, not made again. Code is not an
// enumeration, so a later retryable code needs no new data version.
type TurnStepRetried struct {
	TurnID  string `json:"turnId" jsonschema:"minLength=1"`
	Step    uint64 `json:"step" jsonschema:"minimum=1"`
	Attempt uint64 `json:"attempt" jsonschema:"minimum=2"`
	Code    string `json:"code" jsonschema:"minLength=1"`
}

// registerStepRetried adds turn.step_retried (data version 1) to r.
func registerStepRetried(r *EventRegistry) error {
	return registerBuiltin(r, EventTurnStepRetried, func(d TurnStepRetried) error {
		if d.Attempt < 2 {
			return fmt.Errorf("attempt %d: a retry is attempt 2 or later", d.Attempt)
		}
		return all(nonEmpty("turnId", d.TurnID), nonEmpty("code", d.Code), positive("step", d.Step))
	})
}
