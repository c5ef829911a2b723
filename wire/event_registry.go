package wire

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
)

// EventRegistry is the runtime vocabulary of session events: for each kind
// and each of its data versions, its Go type, the JSON Schema generated
// from that type and a validation function. Every version a kind ever had
// stays registered, so events of an older version keep validating. Agent
// code registers its own kinds at start-up; registration and lookups are
// safe for concurrent use.
type EventRegistry struct {
	mu    sync.RWMutex
	kinds map[string][]*eventSpec // data version v at index v-1; never modified in place
}

type eventSpec struct {
	v        int
	typ      reflect.Type
	contract *contract
	check    func(json.RawMessage) error
	// shape is set when the Go side states everything the kind's schema
	// does: a built-in kind (its validate function covers the schema's
	// constraints; equivalence_test.go holds it to that), or a data type
	// without jsonschema tags or schema methods, whose generated schema is
	// its shape alone. Its data is then checked without the schema.
	shape  *shape
	decode func(json.RawMessage) error // check, after shape: plain Unmarshal
}

// NewEventRegistry returns an empty registry (no built-ins); the zero value
// is empty too.
func NewEventRegistry() *EventRegistry {
	return &EventRegistry{kinds: map[string][]*eventSpec{}}
}

// builtins is built once; DefaultEvents hands out copies.
var builtins = sync.OnceValue(func() *EventRegistry {
	r := NewEventRegistry()
	if err := registerBuiltins(r); err != nil {
		panic(err)
	}
	return r
})

// DefaultEvents returns a new registry holding the built-in kinds, to which
// agent code adds its own.
func DefaultEvents() *EventRegistry {
	b := builtins()
	b.mu.RLock()
	defer b.mu.RUnlock()
	return &EventRegistry{kinds: maps.Clone(b.kinds)}
}

// RegisterEvent adds kind (data version 1) with Go type T, which must be a
// struct: its JSON Schema is generated from T, and data is accepted only if
// it matches the schema, decodes into T without unknown fields and passes
// validate (which may be nil).
//
// The schema is the declared contract. At runtime a data type whose schema
// states only its shape (no jsonschema tags, no schema methods) is checked
// by the typed decoder alone; any other type is also checked against the
// compiled schema, since validate need not state the tags' constraints.
func RegisterEvent[T any](r *EventRegistry, kind string, validate func(T) error) error {
	return registerEvent(r, kind, 1, validate, false)
}

// registerEvent is RegisterEvent for data version v, which must follow the
// kind's newest (1 for a new kind); complete declares that validate states
// every constraint of T's schema beyond its shape (the built-ins).
func registerEvent[T any](r *EventRegistry, kind string, v int, validate func(T) error, complete bool) error {
	typ := reflect.TypeFor[T]()
	if !eventKindRE.MatchString(kind) || len(kind) > 64 {
		return fmt.Errorf("%w: event kind %q must match %s (at most 64 bytes)", ErrRegistry, kind, eventKindRE)
	}
	if typ.Kind() != reflect.Struct {
		return fmt.Errorf("%w: event kind %q: data type %s is not a struct", ErrRegistry, kind, typ)
	}
	c, err := safeContract("events/"+kind+".v"+strconv.Itoa(v)+".json", reflect.New(typ).Elem().Interface())
	if err != nil {
		return fmt.Errorf("%w: event kind %q: %w", ErrRegistry, kind, err)
	}
	spec := &eventSpec{v: v, typ: typ, contract: c, check: func(raw json.RawMessage) error {
		var v T
		if err := unmarshalStrict(raw, &v); err != nil {
			return err
		}
		if validate == nil {
			return nil
		}
		return validate(v)
	}}
	if sh, plain, ok := shapeOf(typ); ok && (plain || complete) {
		spec.shape = sh
		spec.decode = func(raw json.RawMessage) error {
			var v T
			if err := json.Unmarshal(raw, &v); err != nil {
				return err
			}
			if validate == nil {
				return nil
			}
			return validate(v)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kinds == nil {
		r.kinds = map[string][]*eventSpec{}
	}
	have := r.kinds[kind]
	switch {
	case v == 1 && len(have) > 0:
		return fmt.Errorf("%w: event kind %q is already registered", ErrRegistry, kind)
	case v != len(have)+1:
		return fmt.Errorf("%w: event kind %q: data version %d does not follow %d", ErrRegistry, kind, v, len(have))
	}
	r.kinds[kind] = append(slices.Clip(have), spec)
	return nil
}

// safeContract is newContract that turns a reflector panic (a field type
// with no JSON form, such as a channel) into an error.
func safeContract(name string, v any) (c *contract, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("generate schema: %v", p)
		}
	}()
	return newContract(name, v)
}

// IsBuiltinEvent reports whether kind is one of the built-in event kinds
// (those [DefaultEvents] holds before agent code adds its own): events the
// runtime records, which an agent may neither register nor emit.
func IsBuiltinEvent(kind string) bool { return builtins().Has(kind) }

// Has reports whether kind is registered.
func (r *EventRegistry) Has(kind string) bool { return r.spec(kind) != nil }

// Kinds lists the registered kinds, sorted.
func (r *EventRegistry) Kinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.kinds))
}

// Schema returns the generated JSON Schema of a kind's newest data version
// (nil if the kind is not registered).
func (r *EventRegistry) Schema(kind string) []byte {
	return r.SchemaV(kind, r.Version(kind))
}

// SchemaV returns the generated JSON Schema of data version v of a kind
// (nil if the kind or the version is not registered).
func (r *EventRegistry) SchemaV(kind string, v int) []byte {
	if s := r.specV(kind, v); s != nil {
		return append([]byte(nil), s.contract.raw...)
	}
	return nil
}

// Version returns a kind's newest data version (0 if it is not
// registered); every version from 1 to it is registered.
func (r *EventRegistry) Version(kind string) int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.kinds[kind])
}

// spec returns a kind's newest data version.
func (r *EventRegistry) spec(kind string) *eventSpec {
	return r.specV(kind, r.Version(kind))
}

func (r *EventRegistry) specV(kind string, v int) *eventSpec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	vs := r.kinds[kind]
	if v < 1 || v > len(vs) {
		return nil
	}
	return vs[v-1]
}

// lookup finds e's kind and the spec of its data version.
func (r *EventRegistry) lookup(e *Event) (*eventSpec, error) {
	newest := r.Version(e.Kind)
	switch {
	case newest == 0:
		return nil, e.fail(ErrUnknownKind, "kind is not registered")
	case e.V > newest:
		return nil, e.fail(ErrUnknownVersion, "newest known data version is %d", newest)
	case e.V < 1:
		return nil, e.fail(ErrInvalid, "data version %d", e.V)
	}
	return r.specV(e.Kind, e.V), nil
}

// check validates e's data (data is its parsed form) against its kind: the
// reference check, with the compiled schema.
func (r *EventRegistry) check(e Event, data any) error {
	s, err := r.lookup(&e)
	if err != nil {
		return err
	}
	if err := s.contract.check(data); err != nil {
		return e.fail(ErrInvalid, "data: %v", err)
	}
	if err := s.check(e.Data); err != nil {
		return e.fail(ErrInvalid, "data: %v", err)
	}
	return nil
}

// checkFast validates e's data on the typed path. It returns the lookup
// error (unknown kind or version), or the verdict on the data: a kind
// without a shape is checked against the compiled schema here.
func (r *EventRegistry) checkFast(e *Event) (verdict, error) {
	s, err := r.lookup(e)
	if err != nil {
		return declined, err
	}
	if s.shape == nil {
		doc, err := parseDoc(e.Data)
		if err != nil || s.contract.check(doc) != nil || s.check(e.Data) != nil {
			return declined, nil
		}
		return accepted, nil
	}
	if v := s.shape.checkData(e.Data); v != accepted {
		return v, nil
	}
	if s.decode(e.Data) != nil {
		return declined, nil
	}
	if debugSchema {
		if err := debugCheck(s.contract, e.Data); err != nil {
			return declined, e.fail(ErrInvalid, "data schema (debug check): %v", err)
		}
	}
	return accepted, nil
}

// ValidateData checks an event's data (a JSON object; empty means {}) against
// kind's newest data version, as the append boundary would: the kind must be
// registered and the data must match its schema and validation, within
// MaxEventDataBytes. The runtime calls it on every event a step returns,
// before the step is folded, so no committed event can fail at publish.
// Errors are *EventError.
func (r *EventRegistry) ValidateData(kind string, data []byte) error {
	if len(data) == 0 {
		data = []byte("{}")
	}
	e := Event{Kind: kind, Data: data}
	s := r.spec(kind)
	if s == nil {
		return e.fail(ErrUnknownKind, "kind is not registered")
	}
	e.V = s.v
	if len(data) > MaxEventDataBytes {
		return e.fail(ErrTooLarge, "data is %d bytes, limit %d", len(data), MaxEventDataBytes)
	}
	doc, err := parseObject(data)
	if err != nil {
		return e.fail(ErrInvalid, "data: %v", err)
	}
	return r.check(e, doc)
}
