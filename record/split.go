package record

import (
	"bytes"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// splitCheckpoint finds a record's "checkpoint" member, an object, with
// jsontext's scanner, and returns the record without that member and the
// member's value (verbatim, a copy). encoding/json scanned the checkpoint,
// most of a record's bytes, twice on every read (its decoder's read of the
// value, then the decode): about 100 µs for 8 KiB. ok is false for any
// other shape — no such member, two of them, a name that matches it but
// for case (encoding/json would decode that one too), a value that is not
// an object, a syntax error —: the caller decodes the whole record as
// before, with the same result and the same errors.
func splitCheckpoint(data []byte) (rest, cp []byte, ok bool) {
	dec := jsontext.NewDecoder(bytes.NewBuffer(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, nil, false
	}
	start, end := int64(-1), int64(-1)
	for dec.PeekKind() == '"' {
		from := dec.InputOffset()
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, nil, false
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return nil, nil, false
		}
		switch {
		case name == "checkpoint":
			if start >= 0 || v.Kind() != '{' {
				return nil, nil, false
			}
			start, end, cp = from, dec.InputOffset(), bytes.Clone(v)
		case strings.EqualFold(name, "checkpoint"):
			return nil, nil, false
		}
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '}' || start < 0 {
		return nil, nil, false
	}
	// The member's span starts after the previous member (its comma
	// included) or, for the first member, after the brace: then the comma
	// that follows it goes instead.
	head, tail := data[:start], data[end:]
	if h := bytes.TrimRight(head, " \t\r\n"); h[len(h)-1] == '{' {
		t := bytes.TrimLeft(tail, " \t\r\n")
		if len(t) > 0 && t[0] == ',' {
			tail = t[1:]
		}
	}
	rest = make([]byte, 0, len(head)+len(tail))
	return append(append(rest, head...), tail...), cp, true
}
