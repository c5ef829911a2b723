package runtime

import (
	"encoding/json"

	"github.com/baton-rt/baton/wire"
)

// The machine builds the data of every built-in event it records from
// wire's typed bodies (wire.EventBody), and encodes it as it always has,
// from the days it built bodies as maps: members sorted by name in every
// object, and a few members written even when empty where wire's type
// omits them (writtenEmpty). Those bytes are what every committed outbox
// and event stream holds and what the scripts under testdata/ show;
// TestBodyEncoding holds each kind to the map encoding it replaced.

// writtenEmpty lists, per kind, the string members the machine writes
// even when they are empty.
var writtenEmpty = map[string][]string{
	EventTurnStarted:   {"caller"}, // a delivery without a caller
	EventMessageOutput: {"text"},   // Output("")
}

// builtin is the machine's event of a built-in kind.
func builtin(b wire.EventBody) Event {
	kind := b.EventKind()
	data, err := encodeBody(kind, b)
	if err != nil { // the built-in bodies hold only strings, numbers and objects of them
		return NewEvent(kind, map[string]string{"unmarshalable": err.Error()})
	}
	return Event{Kind: kind, Data: data}
}

// encodeBody is the machine's encoding of a kind's body; an empty body is
// no data (the driver stamps {}).
func encodeBody(kind string, b wire.EventBody) (json.RawMessage, error) {
	raw, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	members, err := sortedMembers(raw)
	if err != nil {
		return nil, err
	}
	for _, name := range writtenEmpty[kind] {
		if _, ok := members[name]; !ok {
			members[name] = json.RawMessage(`""`)
		}
	}
	if len(members) == 0 {
		return nil, nil
	}
	return json.Marshal(members)
}

// sortedMembers splits a JSON object into its members, each object among
// them re-encoded with its members sorted by name (encoding/json writes a
// map's keys in order); every other value keeps its bytes. The bodies hold
// no arrays of objects.
func sortedMembers(obj json.RawMessage) (map[string]json.RawMessage, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(obj, &members); err != nil {
		return nil, err
	}
	for name, v := range members {
		if len(v) == 0 || v[0] != '{' {
			continue
		}
		inner, err := sortedMembers(v)
		if err != nil {
			return nil, err
		}
		if members[name], err = json.Marshal(inner); err != nil {
			return nil, err
		}
	}
	return members, nil
}

// emit stages a machine event.
func (m *Machine) emit(b wire.EventBody) { m.st.events = append(m.st.events, builtin(b)) }
