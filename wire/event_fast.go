package wire

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The typed fast path of DecodeEvent (and so of EncodeEvent): the envelope is
// read straight into Event and checked by the Go rules (validateEnvelope);
// a kind's data is checked by its shape (exact member names, no unknown
// member, no null, required members present) before it is decoded into its
// Go type and validated. As for commands, the fast path only accepts;
// everything else is decided by the reference path (decodeEventReference),
// which runs the compiled schemas and produces the typed error.

// Envelope members, as bits of a seen-set.
const (
	eSession = 1 << iota
	eSeq
	eTime
	eOwner
	eDeployment
	eKind
	eV
	eData
	eAll = 1<<iota - 1
)

// decodeEventFast reads an event envelope. It returns accepted with the
// normalized, validated event, or a verdict for the reference path.
func decodeEventFast(b []byte) (Event, verdict) {
	if !utf8.Valid(b) {
		return Event{}, rejected
	}
	d := cmdDecoder{s: jscan{b: b}}
	s := &d.s
	var e Event
	m := d.object(func(k []byte, m *seen) bool {
		switch string(k) {
		case "sessionId":
			m.add(eSession)
			e.SessionID = s.string()
		case "seq":
			m.add(eSeq)
			n, err := strconv.ParseUint(string(s.number()), 10, 64)
			if err != nil {
				return false
			}
			e.Seq = n
		case "time":
			m.add(eTime)
			e.Time = s.timeValue()
		case "ownerRunId":
			m.add(eOwner)
			e.OwnerRunID = s.string()
		case "deploymentId":
			m.add(eDeployment)
			e.DeploymentID = s.string()
		case "kind":
			m.add(eKind)
			e.Kind = s.string()
		case "v":
			m.add(eV)
			n, err := strconv.ParseInt(string(s.number()), 10, 64)
			if err != nil {
				return false
			}
			e.V = int(n)
		case "data":
			m.add(eData)
			if s.peek() != '{' {
				return false
			}
			e.Data = s.raw()
		default:
			return false
		}
		return !s.bad
	})
	switch {
	case d.dup:
		return Event{}, declined
	case !d.ok():
		return Event{}, failedVerdict(b, false)
	case !s.end() || m.set != eAll:
		return Event{}, rejected
	}
	e.Time = e.Time.UTC() // normalizeEvent: the data is compact already
	if e.validateEnvelope() != nil {
		return Event{}, rejected
	}
	return e, accepted
}

// validEventKind matches eventKindPattern, ^[a-z][a-z0-9]*([._-][a-z0-9]+)*$.
func validEventKind(k string) bool {
	if k == "" || k[0] < 'a' || k[0] > 'z' {
		return false
	}
	sep := false
	for i := 1; i < len(k); i++ {
		switch c := k[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			sep = false
		case (c == '.' || c == '_' || c == '-') && !sep:
			sep = true
		default:
			return false
		}
	}
	return !sep
}

// shape is the JSON shape of a Go type as far as the generated schema
// states it beyond what encoding/json checks itself: exact member names,
// no unknown member, required members, no null (except where the schema
// allows anything), and the date-time format of times. Types are then
// checked by decoding into the Go type.
type shape struct {
	kind     shapeKind
	fields   map[string]shapeField // object: members by exact JSON name
	required uint64                // object: bits of required members
	elem     *shape                // array elements, map values, pointer target
}

type shapeField struct {
	bit   uint64
	shape *shape
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
		sh.fields[name] = shapeField{bit: bit, shape: st.of(f.Type)}
		if required {
			sh.required |= bit
		}
	}
	return sh
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

// check reads one value of the shape. It reports dup for an object whose
// member names repeat (ambiguous for a typed reader: declined).
func (sh *shape) check(d *cmdDecoder) {
	s := &d.s
	switch sh.kind {
	case shapeAny:
		s.skipValue()
	case shapeScalar:
		switch s.peek() {
		case '{', '[', 'n':
			s.fail()
		default:
			s.skipValue()
		}
	case shapeTime:
		s.timeValue()
	case shapeArray:
		if !s.open('[') {
			return
		}
		for first := true; s.more(&first, ']') && d.ok(); {
			sh.elem.check(d)
		}
	case shapeMap:
		if !s.open('{') {
			return
		}
		for first := true; s.more(&first, '}') && d.ok(); {
			s.key()
			sh.elem.check(d)
		}
	case shapeObject:
		var m seen64
		if !s.open('{') {
			return
		}
		for first := true; s.more(&first, '}') && d.ok(); {
			f, ok := sh.fields[string(s.key())]
			if !ok {
				s.fail()
				return
			}
			if uint64(m)&f.bit != 0 {
				d.dup = true
				return
			}
			m |= seen64(f.bit)
			f.shape.check(d)
		}
		if d.ok() && uint64(m)&sh.required != sh.required {
			s.fail()
		}
	}
}

type seen64 uint64

// checkData checks raw (one compact JSON object) against the shape.
func (sh *shape) checkData(raw []byte) verdict {
	d := cmdDecoder{s: jscan{b: raw}}
	sh.check(&d)
	switch {
	case d.dup:
		return declined
	case !d.ok():
		return failedVerdict(raw, false)
	case !d.s.end():
		return rejected
	}
	return accepted
}
