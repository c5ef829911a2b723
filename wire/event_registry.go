package wire

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
)

// EventRegistry is the runtime vocabulary of session events: for each kind,
// its Go type, the JSON Schema generated from that type and a validation
// function. Agent code registers its own kinds at start-up; registration
// and lookups are safe for concurrent use.
type EventRegistry struct {
	mu    sync.RWMutex
	kinds map[string]*eventSpec
}

type eventSpec struct {
	v        int
	typ      reflect.Type
	contract *contract
	check    func(json.RawMessage) error
}

// NewEventRegistry returns an empty registry (no built-ins); the zero value
// is empty too.
func NewEventRegistry() *EventRegistry {
	return &EventRegistry{kinds: map[string]*eventSpec{}}
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
func RegisterEvent[T any](r *EventRegistry, kind string, validate func(T) error) error {
	typ := reflect.TypeFor[T]()
	if !eventKindRE.MatchString(kind) || len(kind) > 64 {
		return fmt.Errorf("%w: event kind %q must match %s (at most 64 bytes)", ErrRegistry, kind, eventKindRE)
	}
	if typ.Kind() != reflect.Struct {
		return fmt.Errorf("%w: event kind %q: data type %s is not a struct", ErrRegistry, kind, typ)
	}
	c, err := safeContract("events/"+kind+".v1.json", reflect.New(typ).Elem().Interface())
	if err != nil {
		return fmt.Errorf("%w: event kind %q: %w", ErrRegistry, kind, err)
	}
	spec := &eventSpec{v: 1, typ: typ, contract: c, check: func(raw json.RawMessage) error {
		var v T
		if err := unmarshalStrict(raw, &v); err != nil {
			return err
		}
		if validate == nil {
			return nil
		}
		return validate(v)
	}}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.kinds == nil {
		r.kinds = map[string]*eventSpec{}
	}
	if _, dup := r.kinds[kind]; dup {
		return fmt.Errorf("%w: event kind %q is already registered", ErrRegistry, kind)
	}
	r.kinds[kind] = spec
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

// Has reports whether kind is registered.
func (r *EventRegistry) Has(kind string) bool { return r.spec(kind) != nil }

// Kinds lists the registered kinds, sorted.
func (r *EventRegistry) Kinds() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.kinds))
}

// Schema returns the generated JSON Schema of a kind's data (nil if the kind
// is not registered).
func (r *EventRegistry) Schema(kind string) []byte {
	if s := r.spec(kind); s != nil {
		return append([]byte(nil), s.contract.raw...)
	}
	return nil
}

func (r *EventRegistry) spec(kind string) *eventSpec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.kinds[kind]
}

// check validates e's data (data is its parsed form) against its kind.
func (r *EventRegistry) check(e Event, data any) error {
	s := r.spec(e.Kind)
	switch {
	case s == nil:
		return e.fail(ErrUnknownKind, "kind is not registered")
	case e.V > s.v:
		return e.fail(ErrUnknownVersion, "newest known data version is %d", s.v)
	case e.V != s.v:
		return e.fail(ErrInvalid, "data version %d, want %d", e.V, s.v)
	}
	if err := s.contract.check(data); err != nil {
		return e.fail(ErrInvalid, "data: %v", err)
	}
	if err := s.check(e.Data); err != nil {
		return e.fail(ErrInvalid, "data: %v", err)
	}
	return nil
}
