package ingress

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/baton-rt/baton/wire"
)

// output is a message.output envelope with a ref, split into members.
type output struct {
	env  []field // the envelope's members
	data int     // index of "data" in env
	body []field // the data's members
	ref  wire.BlobRef
	at   int // index of "ref" in body
}

// field is one member of a JSON object, its value as stored.
type field struct {
	key string
	val json.RawMessage
}

// parseOutput splits a message.output envelope whose data has a valid
// ref; false if it has none (or is not the shape it claims).
func parseOutput(envelope []byte) (*output, bool) { return parseRef(envelope, "ref") }

// parseRef splits an envelope whose data has a valid blob ref under key
// (message.output's "ref", task.completed's "resultRef"). The quick check
// relies on the owner's canonical encoding (a field name is never
// escaped).
func parseRef(envelope []byte, key string) (*output, bool) {
	if !bytes.Contains(envelope, []byte(`"`+key+`"`)) {
		return nil, false
	}
	out := &output{}
	var err error
	if out.env, err = fields(envelope); err != nil {
		return nil, false
	}
	if out.data = index(out.env, "data"); out.data < 0 {
		return nil, false
	}
	if out.body, err = fields(out.env[out.data].val); err != nil {
		return nil, false
	}
	if out.at = index(out.body, key); out.at < 0 {
		return nil, false
	}
	if json.Unmarshal(out.body[out.at].val, &out.ref) != nil || out.ref.Validate() != nil {
		return nil, false
	}
	return out, true
}

// with returns the envelope with the data's ref replaced by text.
func (o *output) with(text []byte) []byte { return o.withValue("text", jsonString(text)) }

// withValue returns the envelope with the data's ref replaced by the
// member key of value (raw JSON).
func (o *output) withValue(key string, value json.RawMessage) []byte {
	body := make([]field, 0, len(o.body))
	for i, m := range o.body {
		switch {
		case i == o.at:
			body = append(body, field{key: key, val: value})
		case m.key != key:
			body = append(body, m)
		}
	}
	env := append([]field(nil), o.env...)
	env[o.data].val = object(body)
	return object(env)
}

// fields splits a JSON object into its members, in order.
func fields(obj []byte) ([]field, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("ingress: not a JSON object: %v", err)
	}
	var out []field
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := t.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		out = append(out, field{key: key, val: val})
	}
	return out, nil
}

// index is the position of the member key; -1 if it is absent or
// repeated (readers disagree on which one counts).
func index(ms []field, key string) int {
	at := -1
	for i, m := range ms {
		if m.key != key {
			continue
		}
		if at >= 0 {
			return -1
		}
		at = i
	}
	return at
}

// object encodes members as a JSON object.
func object(ms []field) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonString([]byte(m.key)))
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// jsonString encodes s as a JSON string as the wire encoder does (no HTML
// escaping; valid UTF-8 kept as is).
func jsonString(s []byte) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(string(s)) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
