package runtime

import (
	"encoding/json"
	"reflect"
	"strings"

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
	if err != nil { // the built-in bodies hold only strings, numbers, string lists and objects of them
		return NewEvent(kind, map[string]string{"unmarshalable": err.Error()})
	}
	e := Event{Kind: kind, Data: data}
	if v := wire.DataVersionOf(b); v > 1 {
		e.V = v
	}
	return e
}

// encodeBody is the machine's encoding of a kind's body; an empty body is
// no data (the driver stamps {}). It costs one encoding pass, as the map
// did: a step's message.output of a MiB is encoded inside its step timeout.
func encodeBody(kind string, b wire.EventBody) (json.RawMessage, error) {
	members := membersOf(reflect.ValueOf(b))
	for _, name := range writtenEmpty[kind] {
		if _, ok := members[name]; !ok {
			members[name] = ""
		}
	}
	if len(members) == 0 {
		return nil, nil
	}
	return json.Marshal(members)
}

// membersOf is a body struct as a map from member names to values, as
// encoding/json would write it: a member per exported field under its json
// name, omitempty members left out when empty, a nested struct a map of its
// own (so its members are sorted too; encoding/json writes a map's keys in
// order).
func membersOf(v reflect.Value) map[string]any {
	t := v.Type()
	out := make(map[string]any, t.NumField())
	for i := range t.NumField() {
		f, fv := t.Field(i), v.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case !f.IsExported() || name == "-":
			continue
		case name == "":
			name = f.Name
		}
		if strings.Contains(opts, "omitempty") && emptyJSON(fv) {
			continue
		}
		if fv.Kind() == reflect.Struct {
			out[name] = membersOf(fv)
		} else {
			out[name] = fv.Interface()
		}
	}
	return out
}

// emptyJSON is encoding/json's omitempty rule.
func emptyJSON(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String, reflect.Slice, reflect.Map, reflect.Array:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return v.IsZero()
	}
	return false
}

// emit stages a machine event.
func (m *Machine) emit(b wire.EventBody) { m.st.events = append(m.st.events, builtin(b)) }
