package wire

// session.ended's data version 4: who ended the session and their message
// (a user's terminate command), and the reason idle_expired. The earlier
// versions are SessionEnded (1: done, expired, failed, cancelled),
// SessionEndedV2 (2: terminated) and SessionEndedV3 (3: closed). Each end
// is written at the lowest data version that expresses it
// (LowestSessionEndedBy), so a reader that knows only the older versions
// reads every event that needs nothing new, and passes version 4 through.

// End reasons and enders of session.ended data version 4.
const (
	// EndIdleExpired: the session had no command for the owner's idle
	// limit (data version 4; state version 8 in a checkpoint).
	EndIdleExpired = "idle_expired"

	// EndedByUser: the session's user ended it (a terminate command).
	EndedByUser = "user"
	// EndedByAdmin: an operator ended it.
	EndedByAdmin = "admin"
)

// SessionEndedV4 is data version 4 of session.ended: version 3's reasons
// plus idle_expired, and who ended the session (By: user or admin,
// omitted when unknown) with their Message (valid UTF-8 of at most
// MaxEndMessageBytes bytes, omitted when empty). A reader that knows only
// version 3 passes it through unchanged.
type SessionEndedV4 struct {
	Reason  string `json:"reason" jsonschema:"enum=done,enum=expired,enum=failed,enum=cancelled,enum=terminated,enum=closed,enum=idle_expired"`
	By      string `json:"by,omitempty" jsonschema:"enum=user,enum=admin"`
	Message string `json:"message,omitempty" jsonschema:"minLength=1,maxLength=256"`
}

func (SessionEndedV4) EventKind() string { return EventSessionEnded }

// DataVersion is the data version a SessionEndedV4 is recorded at.
func (SessionEndedV4) DataVersion() int { return 4 }

// LowestSessionEndedBy is session.ended's body for an end with reason, by
// whom (EndedByUser, EndedByAdmin, or "" when unknown) and their message
// ("" for none), at the lowest data version that expresses it: version 4
// when by or message is set, or for reason idle_expired; otherwise
// LowestSessionEnded(reason).
func LowestSessionEndedBy(reason, by, message string) EventBody {
	if by != "" || message != "" {
		return SessionEndedV4{Reason: reason, By: by, Message: message}
	}
	return LowestSessionEnded(reason)
}

// registerSessionEndedV4 adds session.ended's data version 4 to r, after
// registerChildEvents' version 3. Its shape refuses a present empty by
// or message (the schema's enum and minLength), and validate states the
// rest: the reason and by enumerations, and the message's bound in bytes
// (the schema's counts characters).
func registerSessionEndedV4(r *EventRegistry) error {
	return registerBuiltinV(r, EventSessionEnded, 4, func(d SessionEndedV4) error {
		err := all(
			oneOf("reason", d.Reason, EndDone, EndExpired, EndFailed, EndCancelled, EndTerminated, EndClosed, EndIdleExpired),
			checkEndMessage(d.Message))
		if err == nil && d.By != "" {
			err = oneOf("by", d.By, EndedByUser, EndedByAdmin)
		}
		return err
	})
}
