package wire

// session.tagged: the record of a change of the session's tags.

// SessionTagged is emitted when a tag command changed the session's tags:
// Tags is the resulting set (at most MaxTags, ValidateTags), {} when the
// change removed the last one. A tag command that changes nothing emits
// none. The kind is new (no data version of another kind changed), so an
// older reader passes it through unchanged.
//
// Build the event with NewEvent or NewBodyEvent, which write a nil Tags
// as {}: encoding/json alone writes it as null, which the kind refuses.
type SessionTagged struct {
	Tags map[string]string `json:"tags"`
}

// encodedData is data as an event carries it: a SessionTagged's nil Tags
// is the empty set, written {}, and a TurnRolledBack's nil Calls the empty
// list, written []. Any other data is returned as it is.
func encodedData(data any) any {
	switch d := data.(type) {
	case SessionTagged:
		if d.Tags == nil {
			d.Tags = map[string]string{}
		}
		return d
	case *SessionTagged:
		if d != nil && d.Tags == nil {
			return SessionTagged{Tags: map[string]string{}}
		}
	case TurnRolledBack:
		if d.Calls == nil {
			d.Calls = []CallRef{}
		}
		return d
	case *TurnRolledBack:
		if d != nil && d.Calls == nil {
			return TurnRolledBack{TurnID: d.TurnID, Calls: []CallRef{}}
		}
	}
	return data
}

// registerSessionTagged adds session.tagged (data version 1) to r. Its
// schema states the shape (an object of strings; a schema method would
// take the kind off the typed path); ValidateTags' rule states the limits.
func registerSessionTagged(r *EventRegistry) error {
	return registerBuiltin(r, EventSessionTagged, func(d SessionTagged) error { return checkTags(d.Tags) })
}
