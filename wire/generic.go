package wire

import (
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// The generic form for the migration chain, without reflection: parseGeneric
// builds exactly what parseDoc builds (objects as map[string]any, the last
// of repeated names winning; arrays as []any; numbers as json.Number) and
// appendGeneric writes exactly what marshal writes for such a value. Both
// say no (ok false) to anything else; the caller then takes the reflective
// functions, which also word the error. genericTest and the agreement tests
// hold them to parseDoc and marshal.

// parseGenericObject is parseObject for valid input.
func parseGenericObject(b []byte) (map[string]any, bool) {
	if !utf8.Valid(b) {
		return nil, false
	}
	s := jscan{b: b}
	if s.peek() != '{' {
		return nil, false
	}
	v := s.generic()
	if !s.end() {
		return nil, false
	}
	return v.(map[string]any), true
}

func (s *jscan) generic() any {
	switch s.peek() {
	case '{':
		s.open('{')
		m := map[string]any{}
		for first := true; s.more(&first, '}'); {
			k := s.key()
			if s.bad {
				return nil
			}
			key := string(k)
			m[key] = s.generic()
		}
		return m
	case '[':
		s.open('[')
		a := make([]any, 0)
		for first := true; s.more(&first, ']'); {
			a = append(a, s.generic())
		}
		return a
	case '"':
		return s.string()
	case 't':
		s.lit("true")
		return true
	case 'f':
		s.lit("false")
		return false
	case 'n':
		s.lit("null")
		return nil
	}
	return json.Number(s.number())
}

// appendGeneric appends marshal(v) for a generic value.
func appendGeneric(dst []byte, v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case bool:
		if x {
			return append(dst, "true"...), true
		}
		return append(dst, "false"...), true
	case string:
		return appendJSONString(dst, x), true
	case json.Number:
		if x == "" {
			return append(dst, '0'), true // as encoding/json writes an empty Number
		}
		s := jscan{b: []byte(x)}
		if s.number(); s.bad || s.i != len(x) {
			return nil, false
		}
		return append(dst, x...), true
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var ok bool
			if dst, ok = appendGeneric(dst, e); !ok {
				return nil, false
			}
		}
		return append(dst, ']'), true
	case map[string]any:
		var buf [16]string
		keys := buf[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, strings.Compare)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			var ok bool
			if dst, ok = appendGeneric(dst, x[k]); !ok {
				return nil, false
			}
		}
		return append(dst, '}'), true
	}
	return nil, false
}

// appendJSONString writes s as encoding/json does without HTML escaping.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
