package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// The typed check of an event's data. The shape of a kind's Go type is
// derived once, by reflection, at registration; the data is then read
// token by token with the strict decoder's token API (jsontext: exact
// member names, a repeated name refused, valid UTF-8) and held to the
// shape before it is decoded into its Go type and validated. As for
// commands, the check only accepts; everything else is decided by the
// reference path (decodeEventReference), which runs the compiled schemas
// and produces the typed error.

// shape is the JSON shape of a Go type as far as the generated schema
// states it beyond what encoding/json checks itself: exact member names,
// no unknown member, required members, no null (except where the schema
// allows anything), the date-time format of times, and no empty string in
// an optional string member whose schema refuses one (minLength, or an
// enumeration without ""), which would decode as its absence. Types are
// then checked by decoding into the Go type.
type shape struct {
	kind     shapeKind
	fields   map[string]shapeField // object: members by exact JSON name
	required uint64                // object: bits of required members
	elem     *shape                // array elements, map values, pointer target
}

type shapeField struct {
	bit   uint64
	shape *shape
	// nonEmpty: an optional string member whose schema refuses "" (its
	// Go zero, which the decoded value cannot tell from absent).
	nonEmpty bool
}

type shapeKind uint8

const (
	shapeAny    shapeKind = iota // anything, null included (json.RawMessage, any)
	shapeScalar                  // string, number or bool: anything but null
	shapeTime                    // a date-time string
	shapeObject                  // a struct
	shapeArray                   // a slice
	shapeMap                     // a map with string keys
)

var (
	rawType  = reflect.TypeFor[json.RawMessage]()
	timeType = reflect.TypeFor[time.Time]()
)

// shapeOf derives the shape of a data type. ok is false for a type whose
// schema the shape cannot state exactly (custom JSON or schema methods,
// embedded fields, options such as ",string", []byte, non-string map keys);
// its data is then always checked against the compiled schema. plain
// reports that no field carries a jsonschema tag, so that the generated
// schema states nothing but the shape.
func shapeOf(t reflect.Type) (sh *shape, plain, ok bool) {
	st := shapeState{plain: true, seen: map[reflect.Type]*shape{}}
	sh = st.of(t)
	return sh, st.plain, !st.bad
}

type shapeState struct {
	plain, bad bool
	seen       map[reflect.Type]*shape
}

var (
	jsonMarshalerType   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

func (st *shapeState) of(t reflect.Type) *shape {
	if t.Kind() == reflect.Pointer {
		return st.of(t.Elem())
	}
	switch t {
	case rawType:
		return &shape{kind: shapeAny}
	case timeType:
		return &shape{kind: shapeTime}
	}
	if sh, ok := st.seen[t]; ok {
		return sh // recursive type: the shape under construction
	}
	if t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType) ||
		t.Implements(jsonMarshalerType) || hasSchemaMethod(t) {
		st.bad = true
		return &shape{}
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return &shape{kind: shapeScalar}
	case reflect.Interface:
		if t.NumMethod() != 0 {
			st.bad = true
		}
		return &shape{kind: shapeAny}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			st.bad = true // []byte is a base64 string
		}
		return &shape{kind: shapeArray, elem: st.of(t.Elem())}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			st.bad = true
		}
		return &shape{kind: shapeMap, elem: st.of(t.Elem())}
	case reflect.Struct:
		return st.object(t)
	}
	st.bad = true
	return &shape{}
}

func (st *shapeState) object(t reflect.Type) *shape {
	sh := &shape{kind: shapeObject, fields: map[string]shapeField{}}
	st.seen[t] = sh
	for i := range t.NumField() {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		if tag == "-" {
			continue
		}
		if f.Anonymous || len(sh.fields) == 64 {
			st.bad = true
			continue
		}
		if !f.IsExported() {
			continue
		}
		if _, ok := f.Tag.Lookup("jsonschema"); ok {
			st.plain = false
			if s := f.Tag.Get("jsonschema"); s == "-" || strings.Contains(","+s+",", ",required,") ||
				strings.Contains(","+s+",", ",nullable,") || strings.Contains(s, "oneof_") || strings.Contains(s, "anyof_") {
				st.bad = true
			}
		}
		name, opts, _ := strings.Cut(tag, ",")
		if !hasTag || name == "" {
			name = f.Name
		}
		required := true
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "omitempty", "omitzero":
				required = false
			case "":
			default:
				st.bad = true // ",string" and friends
			}
		}
		if _, dup := sh.fields[name]; dup {
			st.bad = true
		}
		bit := uint64(1) << len(sh.fields)
		nonEmpty := !required && f.Type.Kind() == reflect.String && refusesEmpty(f.Tag.Get("jsonschema"))
		sh.fields[name] = shapeField{bit: bit, shape: st.of(f.Type), nonEmpty: nonEmpty}
		if required {
			sh.required |= bit
		}
	}
	return sh
}

// refusesEmpty reports whether a string's jsonschema tag refuses "": a
// minLength of at least 1, or an enumeration without "".
func refusesEmpty(tag string) bool {
	enum, emptyInEnum := false, false
	for _, o := range strings.Split(tag, ",") {
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "minLength":
			if n, err := strconv.Atoi(v); err == nil && n > 0 {
				return true
			}
		case "enum":
			enum, emptyInEnum = true, emptyInEnum || v == ""
		}
	}
	return enum && !emptyInEnum
}

// hasSchemaMethod reports whether t customizes its generated schema.
func hasSchemaMethod(t reflect.Type) bool {
	for _, typ := range []reflect.Type{t, reflect.PointerTo(t)} {
		for _, name := range []string{"JSONSchema", "JSONSchemaExtend", "JSONSchemaAlias", "JSONSchemaProperty"} {
			if _, ok := typ.MethodByName(name); ok {
				return true
			}
		}
	}
	return false
}

// check reads one value of the shape from dec and reports whether it fits.
func (sh *shape) check(dec *jsontext.Decoder) bool {
	switch sh.kind {
	case shapeAny:
		return dec.SkipValue() == nil
	case shapeScalar:
		switch dec.PeekKind() {
		case '"', '0', 't', 'f':
			return dec.SkipValue() == nil
		}
		return false // null, an object, an array, or not JSON
	case shapeTime:
		v, err := dec.ReadValue()
		var t time.Time
		return err == nil && timeToken(v, &t)
	case shapeArray:
		return sh.elements(dec, '[', ']', false)
	case shapeMap:
		return sh.elements(dec, '{', '}', true)
	case shapeObject:
		return sh.object(dec)
	}
	return false
}

// elements reads an array (or a map's members) whose values are all of the
// element shape.
func (sh *shape) elements(dec *jsontext.Decoder, open, close jsontext.Kind, keyed bool) bool {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != open {
		return false
	}
	for dec.PeekKind() != close {
		if keyed {
			if _, err := dec.ReadToken(); err != nil {
				return false
			}
		}
		if !sh.elem.check(dec) {
			return false
		}
	}
	_, err := dec.ReadToken()
	return err == nil
}

// object reads an object whose members are the struct's, each of its
// shape, with every required member present.
func (sh *shape) object(dec *jsontext.Decoder) bool {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	var set uint64 // the decoder refuses a repeated name itself
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return false
		}
		f, ok := sh.fields[name.String()]
		if !ok || !f.check(dec) {
			return false
		}
		set |= f.bit
	}
	_, err := dec.ReadToken()
	return err == nil && set&sh.required == sh.required
}

// check reads the value of a member: of its shape, and not "" when the
// member's schema refuses that.
func (f shapeField) check(dec *jsontext.Decoder) bool {
	if !f.nonEmpty || dec.PeekKind() != '"' {
		return f.shape.check(dec)
	}
	v, err := dec.ReadValue()
	return err == nil && string(v) != `""`
}

// checkData reports whether raw (one JSON object, and nothing after it)
// fits the shape.
func (sh *shape) checkData(raw []byte) verdict {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if !sh.check(dec) {
		return declined
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return declined
	}
	return accepted
}
