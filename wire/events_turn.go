package wire

import "errors"

// turn.completed's later data versions: 2 (stopReason done or limit, and
// usage; TurnCompletedV2 is in events_builtin.go) and 3 (stop reason error).

// TurnCompletedV3 is data version 3 of turn.completed: version 2's stop
// reasons plus error (a step failed and ended the turn, after its error
// event). A reader that knows only version 2 passes it through unchanged.
// It is written only for error (LowestTurnCompleted).
type TurnCompletedV3 struct {
	TurnID     string `json:"turnId" jsonschema:"minLength=1"`
	StopReason string `json:"stopReason" jsonschema:"enum=done,enum=limit,enum=error"`
	Usage      Usage  `json:"usage"`
}

func (TurnCompletedV3) EventKind() string { return EventTurnCompleted }

// DataVersion is the data version a TurnCompletedV3 is recorded at.
func (TurnCompletedV3) DataVersion() int { return 3 }

// LowestTurnCompleted is turn.completed's body at the lowest data version
// that expresses d: version 2 for done and limit, version 3 for error.
func LowestTurnCompleted(d TurnCompletedV2) EventBody {
	if d.StopReason == StopError {
		return TurnCompletedV3(d)
	}
	return d
}

// registerTurnEvents adds turn.completed's data versions 2 and 3 to r,
// after registerBuiltins' version 1.
func registerTurnEvents(r *EventRegistry) error {
	return errors.Join(
		registerBuiltinV(r, EventTurnCompleted, 2, func(d TurnCompletedV2) error {
			return all(nonEmpty("turnId", d.TurnID), oneOf("stopReason", d.StopReason, StopDone, StopLimit), d.Usage.Validate())
		}),
		registerBuiltinV(r, EventTurnCompleted, 3, func(d TurnCompletedV3) error {
			return all(nonEmpty("turnId", d.TurnID), oneOf("stopReason", d.StopReason, StopDone, StopLimit, StopError),
				d.Usage.Validate())
		}),
	)
}
