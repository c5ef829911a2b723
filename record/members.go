package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// Members is what a record kept of the JSON members its build does not
// know: a later build's, written back unchanged by every write of this
// build (docs/wire.md, "The session record"). It is the members' JSON, in
// name order, as an object's content without its braces ("" when none):
// a string, so the records holding it stay comparable and copies of a
// record share it unchanged.
type Members string

// Map is the kept members by name.
func (m Members) Map() map[string]json.RawMessage {
	if m == "" {
		return nil
	}
	var out map[string]json.RawMessage
	if err := json.Unmarshal([]byte("{"+string(m)+"}"), &out); err != nil {
		return nil // Members is built by decodeKeeping only
	}
	return out
}

// membersOf encodes kept members, in name order.
func membersOf(kept map[string]json.RawMessage) (Members, error) {
	var b bytes.Buffer
	for _, name := range slices.Sorted(maps.Keys(kept)) {
		key, err := json.Marshal(name)
		if err != nil {
			return "", err
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.Write(key)
		b.WriteByte(':')
		if err := json.Compact(&b, kept[name]); err != nil {
			return "", err
		}
	}
	return Members(b.String()), nil
}

// knownMembers caches, per struct type, the JSON member names its fields
// encode to.
var knownMembers sync.Map // reflect.Type → map[string]bool

func known(t reflect.Type) map[string]bool {
	if m, ok := knownMembers.Load(t); ok {
		return m.(map[string]bool)
	}
	m := map[string]bool{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		m[name] = true
	}
	knownMembers.Store(t, m)
	return m
}

// decodeInto zeroes *v and decodes data into it, keeping the members v's
// type does not know in *extra: every UnmarshalJSON of this package, each
// given its value as the same struct type without JSON methods.
func decodeInto(data []byte, v any, extra *Members) error {
	reflect.ValueOf(v).Elem().SetZero()
	m, err := decodeKeeping(data, v)
	if err != nil {
		return err
	}
	*extra = m
	return nil
}

// decodeKeeping decodes data into v (a pointer to a struct type without
// JSON methods) and returns the members v's type does not know. The usual
// case, an object with no such member, costs one decode.
func decodeKeeping(data []byte, v any) (Members, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err == nil {
		if d.More() {
			return "", fmt.Errorf("record: trailing data after the JSON object")
		}
		return "", nil
	}
	// A member this build does not know (or an error json.Unmarshal
	// reports again below): decode leniently, then collect the members.
	reflect.ValueOf(v).Elem().SetZero()
	if err := json.Unmarshal(data, v); err != nil {
		return "", err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return "", err
	}
	k := known(reflect.TypeOf(v).Elem())
	kept := map[string]json.RawMessage{}
	for name, raw := range all {
		if !k[name] && !knownFold(k, name) {
			kept[name] = raw
		}
	}
	return membersOf(kept)
}

// knownFold reports whether name matches a known member but for case, as
// encoding/json matches it on decode (such a member is decoded, not kept).
func knownFold(k map[string]bool, name string) bool {
	for n := range k {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// member is one encoded member to add after a struct's own: its name and
// its value's JSON, written verbatim.
type member struct {
	name string
	raw  []byte
}

// encodeKeeping encodes v (a struct type without JSON methods), then adds
// the raw members after its own and the kept ones after those.
func encodeKeeping(v any, extra Members, raw ...member) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil || extra == "" && len(raw) == 0 {
		return data, err
	}
	n := len(data) + len(extra) + 1
	for _, m := range raw {
		n += len(m.name) + len(m.raw) + 4
	}
	out := make([]byte, 0, n)
	out = append(out, data[:len(data)-1]...) // the object without its closing brace
	sep := len(data) > 2                     // not "{}"
	for _, m := range raw {
		if sep {
			out = append(out, ',')
		}
		out = append(append(append(append(out, '"'), m.name...), '"', ':'), m.raw...)
		sep = true
	}
	if extra != "" {
		if sep {
			out = append(out, ',')
		}
		out = append(out, extra...)
	}
	return append(out, '}'), nil
}
