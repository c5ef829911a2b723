package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"unicode/utf8"

	genschema "github.com/invopop/jsonschema"
	valschema "github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaBase prefixes the $id of every generated schema.
const schemaBase = "https://github.com/baton-rt/baton/wire/"

// contract is the JSON Schema of one Go type: generated from the type by
// invopop/jsonschema (never hand-written) and compiled by
// santhosh-tekuri/jsonschema for runtime validation. The Go type is the
// declared shape; the schema is what runtime validation and the frozen
// testdata agree on.
type contract struct {
	id     string
	raw    []byte // the generated schema, indented: the frozen form
	schema *valschema.Schema
}

// newContract reflects the schema of v's type and compiles it.
func newContract(name string, v any) (*contract, error) {
	return newContractWith(name, v, nil)
}

// newContractWith is newContract with the reflected document adjusted
// first (adjust may be nil): for a frozen shape whose Go type is shared
// with a newer one (the step protocol's inputs, docs/wire.md).
func newContractWith(name string, v any, adjust func(*genschema.Schema)) (*contract, error) {
	r := genschema.Reflector{Anonymous: true, ExpandedStruct: true}
	s := r.Reflect(v)
	if adjust != nil {
		adjust(s)
	}
	s.ID = genschema.ID(schemaBase + name)
	raw, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("wire: generate schema %s: %w", name, err)
	}
	return compileContract(string(s.ID), append(raw, '\n'))
}

// compileContract compiles a schema document (generated, or the frozen
// schema of a historic version) whose $id is id.
func compileContract(id string, raw []byte) (*contract, error) {
	doc, err := valschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("wire: reread schema %s: %w", id, err)
	}
	c := valschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(id, doc); err != nil {
		return nil, fmt.Errorf("wire: add schema %s: %w", id, err)
	}
	compiled, err := c.Compile(id)
	if err != nil {
		return nil, fmt.Errorf("wire: compile schema %s: %w", id, err)
	}
	return &contract{id: id, raw: raw, schema: compiled}, nil
}

// mustContract is newContract for package-level shapes, whose schemas are
// fixed at build time: a failure is a programming error caught by every test.
func mustContract(name string, v any) *contract {
	c, err := newContract(name, v)
	if err != nil {
		panic(err)
	}
	return c
}

// check validates a parsed document (from parseDoc) against the schema and
// returns a one-line reason on failure.
func (c *contract) check(doc any) error {
	err := c.schema.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *valschema.ValidationError
	if errors.As(err, &ve) {
		return errors.New(leafReason(ve))
	}
	return err
}

// leafReason follows the first cause down to a single-line message.
func leafReason(ve *valschema.ValidationError) string {
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	return ve.Error()
}

// parseDoc parses JSON into the generic form the schema validator and the
// migrations work on: objects as map[string]any, numbers as json.Number (no
// precision lost). Invalid UTF-8 is rejected rather than silently replaced.
func parseDoc(b []byte) (any, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("not valid UTF-8")
	}
	doc, err := valschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	return doc, nil
}

// parseObject is parseDoc for a value that must be a JSON object.
func parseObject(b []byte) (map[string]any, error) {
	doc, err := parseDoc(b)
	if err != nil {
		return nil, err
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("not a JSON object")
	}
	return obj, nil
}

// marshal is the canonical encoding: encoding/json field order, no HTML
// escaping, embedded raw JSON compacted, no trailing newline.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// unmarshalStrict decodes b into v, rejecting unknown fields. Callers validate
// b against the schema first, which also rejects what encoding/json would
// tolerate (case-folded keys, null for non-pointer fields).
func unmarshalStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the value")
	}
	return nil
}

// inlineSchema reflects v's type without $defs or $id, for embedding in a
// hand-composed union (Message) that the reflector cannot express.
func inlineSchema(v any) *genschema.Schema {
	r := genschema.Reflector{Anonymous: true, DoNotReference: true, ExpandedStruct: true}
	s := r.ReflectFromType(reflect.TypeOf(v))
	s.Version = ""
	s.Definitions = nil
	return s
}

// prop returns a property of a generated object schema (nil if absent).
func prop(s *genschema.Schema, name string) *genschema.Schema {
	if s.Properties == nil {
		return nil
	}
	p, _ := s.Properties.Get(name)
	return p
}
