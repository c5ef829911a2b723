package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Strict JSON. encoding/json matches member names case-insensitively,
// accepts a repeated member (the last wins), null for any field and
// trailing data after the value. A request body is none of that: it is one
// JSON object whose member names are exactly the declared ones, each once,
// none null. strictObject checks that shape; decodeStrict then decodes with
// unknown fields refused.

// strictObject checks that b is one JSON object with members from allowed
// only (exact names), none repeated, none null, and nothing after it.
func strictObject(b []byte, allowed []string) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return jsonError(err, "", "")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("want a JSON object")
	}
	seen := make(map[string]bool, len(allowed))
	prev := ""
	for dec.More() {
		name, err := member(dec, allowed, seen, prev)
		if err != nil {
			return err
		}
		prev = name
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return jsonError(err, "", prev)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

// member reads one member; prev is the one before it, for the wording of
// a syntax error between the two.
func member(dec *json.Decoder, allowed []string, seen map[string]bool, prev string) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", jsonError(err, "", prev)
	}
	name, _ := tok.(string) // a key is always a string
	switch {
	case !slices.Contains(allowed, name) && slices.Contains(runtimeFields, name):
		return "", fmt.Errorf("field %q is set by the runtime only (on a parent session's command to its child); a channel cannot send it (allowed: %s)", name, strings.Join(allowed, ", "))
	case !slices.Contains(allowed, name):
		return "", fmt.Errorf("unknown field %q (allowed: %s)", name, strings.Join(allowed, ", "))
	case seen[name]:
		return "", fmt.Errorf("field %q appears twice", name)
	}
	seen[name] = true
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return "", jsonError(err, name, "")
	}
	if string(raw) == "null" {
		return "", fmt.Errorf("field %q is null (omit it instead)", name)
	}
	return name, nil
}

// decodeStrict checks the shape of b and decodes it into v.
func decodeStrict(b []byte, v any, allowed []string) error {
	if err := strictObject(b, allowed); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, blame(b, v), "")
	}
	return nil
}

// blame finds the member of the object b whose value v's type refuses, by
// decoding each member alone ("" if none does on its own).
func blame(b []byte, v any) string {
	var members map[string]json.RawMessage
	if json.Unmarshal(b, &members) != nil {
		return ""
	}
	names := slices.Sorted(maps.Keys(members))
	for _, name := range names {
		one, _ := json.Marshal(map[string]json.RawMessage{name: members[name]})
		if json.Unmarshal(one, reflect.New(reflect.TypeOf(v).Elem()).Interface()) != nil {
			return name
		}
	}
	return ""
}

// jsonError words a decoding error for a client, naming the field it is
// in (or the member it follows) and never quoting the decoder.
func jsonError(err error, field, after string) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	in := ""
	if field != "" {
		in = fmt.Sprintf("field %q: ", field)
	}
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Errorf("field %q: want %s, got a JSON %s", typeErr.Field, typeName(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &typeErr):
		return fmt.Errorf("%swant %s, got a JSON %s", in, typeName(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &syntaxErr): // its Offset counts from where the decoder resumed: not told
		return fmt.Errorf("%smalformed JSON: %s", in, syntaxWords(syntaxErr.Error(), after))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%smalformed JSON: the body ends too early", in)
	}
	// A refusal of a value's own decoder (wire.Message, a strict part).
	msg := err.Error()
	for _, prefix := range []string{"json: ", "wire: "} {
		msg = strings.TrimPrefix(msg, prefix)
	}
	if field == "" {
		return fmt.Errorf("malformed JSON: %s", msg)
	}
	return fmt.Errorf("%s%s", in, msg)
}

// syntaxPhrases rewords encoding/json's syntax errors, most specific first.
var syntaxPhrases = []struct{ goText, words string }{
	{"after object key:value pair", "want ',' or '}' after the member"},
	{"after object key", "want ':' after the member name"},
	{"looking for beginning of object key string", "want a member name in double quotes"},
	{"looking for beginning of value", "want a JSON value (strings go in double quotes)"},
	{"after array element", "want ',' or ']' after the array element"},
	{"after top-level value", "unexpected data after the value"},
	{"in string literal", "a control character in a string (escape it)"},
	{"in string escape code", "an unknown escape in a string"},
	{"hexadecimal character escape", "a \\u escape needs four hex digits"},
	{"in literal", "not a JSON value (true, false and null are the only bare words; strings go in double quotes)"},
	{"numeric literal", "a malformed number"},
}

func syntaxWords(goText, after string) string {
	words := "want a member name in double quotes" // right after '{', the one state without a context
	for _, p := range syntaxPhrases {
		if strings.Contains(goText, p.goText) {
			words = p.words
			break
		}
	}
	if after != "" && strings.HasSuffix(words, "after the member") {
		words += fmt.Sprintf(" %q", after)
	}
	if c, ok := badChar(goText); ok {
		return fmt.Sprintf("unexpected %s, %s", c, words)
	}
	return words
}

// badChar is the character quoted in "invalid character 'x' …".
func badChar(goText string) (string, bool) {
	rest, ok := strings.CutPrefix(goText, "invalid character ")
	if !ok || len(rest) < 3 || rest[0] != '\'' {
		return "", false
	}
	end := strings.IndexByte(rest[1:], '\'')
	if end < 0 {
		return "", false
	}
	return rest[:end+2], true
}

func typeName(goType string) string {
	switch {
	case goType == "string", goType == "*string":
		return "a string"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case goType == "bool":
		return "a boolean"
	case strings.Contains(goType, "int"):
		return "a number"
	}
	return "an object"
}
