package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
		return jsonError(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("the body must be a JSON object")
	}
	seen := make(map[string]bool, len(allowed))
	for dec.More() {
		if err := member(dec, allowed, seen); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

func member(dec *json.Decoder, allowed []string, seen map[string]bool) error {
	tok, err := dec.Token()
	if err != nil {
		return jsonError(err)
	}
	name, _ := tok.(string)
	switch {
	case !slices.Contains(allowed, name):
		return fmt.Errorf("unknown field %q (allowed: %s)", name, strings.Join(allowed, ", "))
	case seen[name]:
		return fmt.Errorf("field %q appears twice", name)
	}
	seen[name] = true
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return jsonError(err)
	}
	if string(raw) == "null" {
		return fmt.Errorf("field %q is null (omit it instead)", name)
	}
	return nil
}

// decodeStrict checks the shape of b and decodes it into v.
func decodeStrict(b []byte, v any, allowed []string) error {
	if err := strictObject(b, allowed); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	return nil
}

// jsonError words a decoding error for a client.
func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Errorf("field %q: want %s, got a JSON %s", typeErr.Field, typeName(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &typeErr):
		return fmt.Errorf("want %s, got a JSON %s", typeName(typeErr.Type.String()), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("malformed JSON at byte %d: %v", syntaxErr.Offset, syntaxErr)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("malformed JSON: unexpected end of the body")
	}
	return fmt.Errorf("malformed JSON: %v", err)
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
