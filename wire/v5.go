package wire

import (
	"sync"

	genschema "github.com/invopop/jsonschema"
)

// Version 5 (the current version): the shape of Command with the busy
// modes (a delivery's mode reject, interrupt, rollback, debounce or
// latest, its debounceMs, and a delivery without a mode: the session's
// default) and the kind configure (a session's default mode), its schema
// (generated from the Go types, frozen in testdata/schema_v5.json) and its
// encoder. A later version replaces the Go types, adds a one-step
// migration from 5 and keeps encodeV5 as a down-conversion for v5
// consumers for as long as they exist.

// commandV5 is the generated and compiled schema of the version-5 shape.
var commandV5 = sync.OnceValue(func() *contract { return mustContract("command.v5.json", Command{}) })

// commandCurrent is the schema of the current version.
func commandCurrent() *contract { return commandV5() }

// CommandSchema returns the generated JSON Schema of the current command
// version, exactly as frozen in testdata/schema_v<CurrentVersion>.json.
func CommandSchema() []byte { return append([]byte(nil), commandCurrent().raw...) }

// userKinds are the kinds that are a user's, never a session runtime's:
// they carry no parentSessionId (and so no handle or depth).
var userKinds = []Kind{KindTerminate, KindConfigure}

// JSONSchemaExtend adds what the reflector cannot see: the version
// constant, the kind enumeration, the kind ↔ body correspondence (a body
// belongs to its kind; it is required unless optional, as terminate's),
// that parentSessionId, handle and depth go together, and that a
// terminate or configure command carries none of them.
func (Command) JSONSchemaExtend(s *genschema.Schema) {
	prop(s, "v").Const = CurrentVersion
	kind := prop(s, "kind")
	for _, k := range Kinds() {
		kind.Enum = append(kind.Enum, string(k))
	}
	s.DependentSchemas = map[string]*genschema.Schema{}
	for _, k := range Kinds() {
		body := bodyOf[k]
		if body == "" {
			continue
		}
		if !optionalBody[k] {
			s.AllOf = append(s.AllOf, &genschema.Schema{If: isKind(k), Then: &genschema.Schema{Required: []string{body}}})
		}
		s.DependentSchemas[body] = isKind(k)
	}
	for _, k := range userKinds {
		s.AllOf = append(s.AllOf, &genschema.Schema{If: isKind(k),
			Then: &genschema.Schema{Not: &genschema.Schema{Required: []string{"parentSessionId"}}}})
	}
	s.DependentRequired = map[string][]string{
		"parentSessionId": {"handle", "depth"},
		"handle":          {"parentSessionId", "depth"},
		"depth":           {"parentSessionId", "handle"},
	}
}

// isKind is the schema of a command of kind k.
func isKind(k Kind) *genschema.Schema {
	s := &genschema.Schema{Properties: genschema.NewProperties(), Required: []string{"kind"}}
	s.Properties.Set("kind", &genschema.Schema{Const: string(k)})
	return s
}

// kindOf is the kind a schema of isKind names ("" for another schema).
func kindOf(s *genschema.Schema) Kind {
	if s == nil || prop(s, "kind") == nil {
		return ""
	}
	k, _ := prop(s, "kind").Const.(string)
	return Kind(k)
}

// onlyWith is the schema of an object whose member name is required when
// its member key is value and absent otherwise: if key is value then
// name is required, else name is not there.
func onlyWith(key, value, name string) *genschema.Schema {
	is := &genschema.Schema{Properties: genschema.NewProperties(), Required: []string{key}}
	is.Properties.Set(key, &genschema.Schema{Const: value})
	return &genschema.Schema{
		If:   is,
		Then: &genschema.Schema{Required: []string{name}},
		Else: &genschema.Schema{Not: &genschema.Schema{Required: []string{name}}},
	}
}

// JSONSchemaExtend requires debounceMs with the mode debounce, and only
// with it.
func (Deliver) JSONSchemaExtend(s *genschema.Schema) {
	s.AllOf = append(s.AllOf, onlyWith("mode", ModeDebounce, "debounceMs"))
}

// JSONSchemaExtend requires defaultDebounceMs with the default mode
// debounce, and only with it.
func (Configure) JSONSchemaExtend(s *genschema.Schema) {
	s.AllOf = append(s.AllOf, onlyWith("defaultMode", ModeDebounce, "defaultDebounceMs"))
}

// JSONSchemaExtend requires a payload to carry something and outputSchema to
// be an object.
func (Payload) JSONSchemaExtend(s *genschema.Schema) {
	one := uint64(1)
	s.MinProperties = &one
	prop(s, "outputSchema").Type = "object"
	prop(s, "ext").PropertyNames = &genschema.Schema{MinLength: &one}
}

// JSONSchemaExtend requires exactly one of result and error.
func (TaskResult) JSONSchemaExtend(s *genschema.Schema) {
	s.OneOf = []*genschema.Schema{{Required: []string{"result"}}, {Required: []string{"error"}}}
}

// JSONSchemaExtend requires exactly one of requestId and attemptId (the
// body of child.waiting and of child.resumed).
func (ChildWaiting) JSONSchemaExtend(s *genschema.Schema) {
	s.OneOf = []*genschema.Schema{{Required: []string{"requestId"}}, {Required: []string{"attemptId"}}}
}

// encodeV5 encodes for a version-5 consumer: normalize, check the Go rules
// (at least as strict as the frozen schema, see equivalence_test.go), then
// marshal canonically. Producer drift dies here. The schema itself is not
// run (unless debugSchema is set).
func encodeV5(c Command) ([]byte, error) {
	c = normalizeCommand(c)
	c.V = 5
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c.encodeChecked(commandV5())
}

// encodeChecked writes a validated command canonically, within
// MaxCommandBytes; with debugSchema set, it also checks the bytes against
// the target version's schema k.
func (c *Command) encodeChecked(k *contract) ([]byte, error) {
	b, err := marshal(c)
	if err != nil {
		return nil, c.fail(ErrInvalid, "marshal: %v", err)
	}
	if len(b) > MaxCommandBytes {
		return nil, c.fail(ErrTooLarge, "%d bytes, limit %d", len(b), MaxCommandBytes)
	}
	if debugSchema {
		if err := debugCheck(k, b); err != nil {
			return nil, c.fail(ErrInvalid, "schema (debug check): %v", err)
		}
	}
	return b, nil
}

// fail builds an error carrying the command's version, kind and ID.
func (c *Command) fail(sentinel error, format string, args ...any) *Error {
	e := reject(sentinel, format, args...)
	e.Version, e.Kind, e.CommandID = c.V, string(c.Kind), c.ID
	return e
}
