package wire

import (
	"bytes"
	"encoding/json"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// jscan is the minimal JSON reader of the typed fast paths (fast.go,
// event_fast.go). It accepts exactly the grammar encoding/json accepts
// (RFC 8259, nesting at most maxJSONDepth) and decodes strings exactly as
// encoding/json does. It reports no reasons: a fast path that meets anything
// it does not accept hands the input to the reference path, which produces
// the typed error.
type jscan struct {
	b     []byte
	i     int
	depth int // open arrays and objects, counted from the document root
	bad   bool
}

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

func (s *jscan) fail() bool { s.bad = true; return false }

func (s *jscan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte (0 at the end).
func (s *jscan) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// consume skips c if it is the next non-space byte.
func (s *jscan) consume(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// end reports whether only white space remains.
func (s *jscan) end() bool {
	s.ws()
	return !s.bad && s.i == len(s.b)
}

// open enters an object or array whose opening byte is c.
func (s *jscan) open(c byte) bool {
	if !s.consume(c) {
		return s.fail()
	}
	s.depth++
	if s.depth > maxJSONDepth {
		return s.fail()
	}
	return true
}

// more iterates the members of an object or the elements of an array after
// open: it consumes the separator and reports whether another one follows.
// first must be true on the first call. close is '}' or ']'.
func (s *jscan) more(first *bool, close byte) bool {
	if s.bad {
		return false
	}
	if *first {
		*first = false
		if s.consume(close) {
			s.depth--
			return false
		}
		return true
	}
	switch s.peek() {
	case ',':
		s.i++
		return true
	case close:
		s.i++
		s.depth--
		return false
	}
	return s.fail()
}

// key reads an object key and the colon after it. The result aliases the
// input when the key has no escapes; compare it, never keep it.
func (s *jscan) key() []byte {
	k, ok := s.str(false)
	if !ok || !s.consume(':') {
		s.fail()
		return nil
	}
	return k
}

func (s *jscan) lit(word string) bool {
	if len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return s.fail()
}

// str reads a string token and returns its decoded bytes. Without escapes
// the result aliases the input; copy asks for a fresh slice in any case.
func (s *jscan) str(copyOut bool) ([]byte, bool) {
	if s.peek() != '"' {
		return nil, s.fail()
	}
	start := s.i + 1
	i := start
	for i < len(s.b) {
		c := s.b[i]
		switch {
		case c == '"':
			s.i = i + 1
			if copyOut {
				return bytes.Clone(s.b[start:i]), true
			}
			return s.b[start:i], true
		case c == '\\':
			return s.strEscaped(start)
		case c < 0x20:
			return nil, s.fail()
		}
		i++
	}
	return nil, s.fail()
}

// strEscaped decodes a string with escapes, as encoding/json's unquote
// does: invalid surrogates become U+FFFD. The input is valid UTF-8.
func (s *jscan) strEscaped(start int) ([]byte, bool) {
	out := make([]byte, 0, 32)
	i := start
	for i < len(s.b) {
		c := s.b[i]
		switch {
		case c == '"':
			s.i = i + 1
			return out, true
		case c < 0x20:
			return nil, s.fail()
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(s.b) {
			return nil, s.fail()
		}
		switch e := s.b[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(s.b[i+2:])
			if r < 0 {
				return nil, s.fail()
			}
			i += 6
			if utf16.IsSurrogate(r) {
				if r2 := u4(s.b[i:]); r2 >= 0 {
					if dec := utf16.DecodeRune(r, r2); dec != unicode.ReplacementChar {
						out = utf8.AppendRune(out, dec)
						i += 6
						continue
					}
				}
				r = unicode.ReplacementChar
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return nil, s.fail()
		}
		i += 2
	}
	return nil, s.fail()
}

// u4 reads a \uXXXX escape (-1 if there is none).
func u4(b []byte) rune {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	return hex4(b[2:])
}

func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// string reads a string value (never null).
func (s *jscan) string() string {
	b, ok := s.str(false)
	if !ok {
		return ""
	}
	return string(b)
}

// boolean reads true or false.
func (s *jscan) boolean() bool {
	switch s.peek() {
	case 't':
		return s.lit("true")
	case 'f':
		s.lit("false")
		return false
	}
	return s.fail()
}

// number reads a number token and returns it undecoded.
func (s *jscan) number() []byte {
	s.ws()
	start, i := s.i, s.i
	b := s.b
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	default:
		s.fail()
		return nil
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || !isDigit(b[i]) {
			s.fail()
			return nil
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			s.fail()
			return nil
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	s.i = i
	return b[start:i]
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skip reads any value and returns its bytes (aliasing the input).
func (s *jscan) skip() []byte {
	s.ws()
	start := s.i
	if !s.skipValue() {
		return nil
	}
	return s.b[start:s.i]
}

func (s *jscan) skipValue() bool {
	switch s.peek() {
	case '{':
		s.open('{')
		for first := true; s.more(&first, '}'); {
			s.key()
			s.skipValue()
		}
	case '[':
		s.open('[')
		for first := true; s.more(&first, ']'); {
			s.skipValue()
		}
	case '"':
		s.str(false)
	case 't':
		s.lit("true")
	case 'f':
		s.lit("false")
	case 'n':
		s.lit("null")
	default:
		s.number()
	}
	return !s.bad
}

// raw reads any value into a fresh, compacted json.RawMessage: what
// encoding/json followed by normalization (compactRaw) produces.
func (s *jscan) raw() json.RawMessage {
	v := s.skip()
	if s.bad {
		return nil
	}
	return compactCopy(v)
}

// compactCopy returns valid JSON v compacted, in a fresh slice.
func compactCopy(v []byte) json.RawMessage {
	if !looseSpace(v) {
		return bytes.Clone(v)
	}
	var buf bytes.Buffer
	buf.Grow(len(v))
	if err := json.Compact(&buf, v); err != nil {
		return bytes.Clone(v)
	}
	return buf.Bytes()
}

// looseSpace reports whether v holds a white-space byte outside its
// strings: whether json.Compact would change valid JSON v. (For invalid
// input the answer does not matter: compaction fails and keeps it.)
func looseSpace(v []byte) bool {
	inString := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case inString:
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ', c == '\t', c == '\n', c == '\r':
			return true
		}
	}
	return false
}

// timeValue reads a time as encoding/json does (time.Time.UnmarshalJSON of
// the undecoded token) and additionally requires the RFC 3339 date-time
// form the schema's "format": "date-time" asserts.
func (s *jscan) timeValue() time.Time {
	s.ws()
	start := s.i
	if _, ok := s.str(false); !ok {
		return time.Time{}
	}
	tok := s.b[start:s.i]
	var t time.Time
	if t.UnmarshalJSON(tok) != nil || !rfc3339DateTime(tok[1:len(tok)-1]) {
		s.fail()
		return time.Time{}
	}
	return t
}

// rfc3339DateTime checks the strict RFC 3339 date-time syntax
// YYYY-MM-DDThh:mm:ss[.frac](Z|±hh:mm) with an offset of at most 23:59.
// time.Time.UnmarshalJSON also accepts one-digit hours, a comma before the
// fraction and offsets up to 99:59, which the schema's date-time format
// rejects; ranges of the date and time fields are checked by the time
// parser itself.
func rfc3339DateTime(b []byte) bool {
	const n = len("2006-01-02T15:04:05")
	if len(b) < n+1 {
		return false
	}
	for i, c := range b[:n] {
		switch i {
		case 4, 7:
			if c != '-' {
				return false
			}
		case 10:
			if c != 'T' {
				return false
			}
		case 13, 16:
			if c != ':' {
				return false
			}
		default:
			if !isDigit(c) {
				return false
			}
		}
	}
	b = b[n:]
	if b[0] == '.' {
		i := 1
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		if i == 1 {
			return false
		}
		b = b[i:]
	}
	if len(b) == 1 {
		return b[0] == 'Z'
	}
	return len(b) == 6 && (b[0] == '+' || b[0] == '-') && b[3] == ':' &&
		isDigit(b[1]) && isDigit(b[2]) && isDigit(b[4]) && isDigit(b[5]) &&
		(b[1]-'0')*10+(b[2]-'0') <= 23 && (b[4]-'0')*10+(b[5]-'0') <= 59
}
