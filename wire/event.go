package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"time"

	genschema "github.com/invopop/jsonschema"
)

// HeaderEventSeq is the header of an event's stream message that carries
// its Seq in decimal, set by the owner when it appends. A reader that cannot
// decode the envelope still learns the seq, so it steps over the event
// instead of waiting for it, and the appender finds the last published event
// without decoding it.
const HeaderEventSeq = "Baton-Event-Seq"

// Event is the envelope of one session event on the public event stream.
// Seq is per session and contiguous from 1; V is the version of the kind's
// data shape; Data is always a JSON object.
type Event struct {
	SessionID    string          `json:"sessionId" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=128"`
	Seq          uint64          `json:"seq" jsonschema:"minimum=1"`
	Time         time.Time       `json:"time"`
	OwnerRunID   string          `json:"ownerRunId" jsonschema:"minLength=1,maxLength=128"`
	DeploymentID string          `json:"deploymentId" jsonschema:"pattern=^[A-Za-z0-9_-]+$,minLength=1,maxLength=64"`
	Kind         string          `json:"kind" jsonschema:"minLength=1,maxLength=64"`
	V            int             `json:"v" jsonschema:"minimum=1"`
	Data         json.RawMessage `json:"data"`
}

// JSONSchemaExtend constrains the kind name and declares data an object.
func (Event) JSONSchemaExtend(s *genschema.Schema) {
	prop(s, "kind").Pattern = eventKindPattern
	prop(s, "data").Type = "object"
}

// eventKindRE: lower-case dotted words, e.g. "turn.started", "myagent.note".
const eventKindPattern = `^[a-z][a-z0-9]*([._-][a-z0-9]+)*$`

var eventKindRE = regexp.MustCompile(eventKindPattern)

// eventEnvelope is the generated schema of the envelope.
var eventEnvelope = sync.OnceValue(func() *contract { return mustContract("event.v1.json", Event{}) })

// EventSchema returns the generated JSON Schema of the event envelope.
func EventSchema() []byte { return append([]byte(nil), eventEnvelope().raw...) }

// NewEvent builds an event of a kind (data version 1) with data marshaled
// canonically. The runtime fills the envelope (session, seq, time, owner
// run, deployment) before EncodeEvent. Nil data is the empty object.
func NewEvent(kind string, data any) (Event, error) {
	return newEventV(kind, 1, data)
}

// newEventV is NewEvent for data version v.
func newEventV(kind string, v int, data any) (Event, error) {
	if data == nil {
		return Event{Kind: kind, V: v, Data: json.RawMessage("{}")}, nil
	}
	data = encodedData(data)
	raw, err := marshal(data)
	if err != nil {
		return Event{}, &EventError{Kind: kind, V: v, Err: ErrInvalid, Reason: err.Error()}
	}
	return Event{Kind: kind, V: v, Data: raw}, nil
}

// DecodeData decodes an event's data into its Go type, rejecting unknown
// fields. Use it after DecodeEvent validated the event.
func DecodeData[T any](e Event) (T, error) {
	var v T
	if err := unmarshalStrict(e.Data, &v); err != nil {
		return v, e.fail(ErrInvalid, "data: %v", err)
	}
	return v, nil
}

// EncodeEvent validates e at the append boundary and returns its canonical
// encoding. With a registry the kind must be registered and its data valid;
// with nil only the envelope is checked. Errors are *EventError.
//
// It accepts exactly what DecodeEvent accepts of the encoding (the events
// on the stream are read back by it): the typed rules run on e itself, and
// whatever they do not accept is decided by decoding the encoding, as
// DecodeEvent would (FuzzEncodeEventAgrees holds the two to each other).
// Decoding every event it has just encoded cost a commit's six events a
// third of their encoding's CPU.
func EncodeEvent(reg *EventRegistry, e Event) ([]byte, error) {
	e = normalizeEvent(e)
	b, err := marshal(e)
	if err != nil {
		return nil, e.fail(ErrInvalid, "marshal: %v", err)
	}
	if acceptsEncoded(reg, &e, len(b)) {
		return b, nil
	}
	if _, err := DecodeEvent(reg, b); err != nil {
		return nil, err
	}
	return b, nil
}

// acceptsEncoded is DecodeEvent's typed path run on the event it would
// decode from an encoding of n bytes: false when any of its rules does not
// accept e (then DecodeEvent of the encoding decides, and words the error).
func acceptsEncoded(reg *EventRegistry, e *Event, n int) bool {
	if n > MaxEventBytes || debugSchema || e.validateEnvelope() != nil {
		return false
	}
	if reg == nil {
		return true
	}
	v, err := reg.checkFast(e)
	return err == nil && v == accepted
}

// DecodeEvent validates an encoded event at the reload boundary. The
// envelope is always checked. With a nil registry (a reader without the
// agent's vocabulary, such as the ingress) an unknown kind's data passes
// through unchanged. With a registry, an unknown kind (or a newer data
// version of a known kind) returns the event together with an *EventError
// wrapping ErrUnknownKind (ErrUnknownVersion), so the caller can report it
// and still forward it; any other error returns no event.
//
// Validation runs on the typed path (typed.go, shape.go): the Go rules, held to
// the frozen schemas by tests. What it does not accept is decided by the
// reference path, which also produces the typed error.
func DecodeEvent(reg *EventRegistry, b []byte) (Event, error) {
	if len(b) > MaxEventBytes {
		return Event{}, &EventError{Err: ErrTooLarge, Reason: fmt.Sprintf("%d bytes, limit %d", len(b), MaxEventBytes)}
	}
	e, v := decodeEventFast(b)
	if v != accepted {
		return decodeEventReference(reg, b)
	}
	if debugSchema {
		if err := debugCheck(eventEnvelope(), b); err != nil {
			return Event{}, e.fail(ErrInvalid, "schema (debug check): %v", err)
		}
	}
	if reg == nil {
		return e, nil
	}
	v, err := reg.checkFast(&e)
	switch {
	case errors.Is(err, ErrUnknownKind) || errors.Is(err, ErrUnknownVersion):
		return e, err // reported, never dropped: the envelope is valid
	case err != nil:
		return Event{}, err
	case v != accepted:
		return decodeEventReference(reg, b)
	}
	return e, nil
}

// decodeEventReference is DecodeEvent without the typed path: generic
// parse, the compiled envelope and data schemas, strict decode and the Go
// rules. It is the reference the typed path is tested against
// (equivalence_test.go) and decides whatever the typed path does not accept.
func decodeEventReference(reg *EventRegistry, b []byte) (Event, error) {
	if len(b) > MaxEventBytes {
		return Event{}, &EventError{Err: ErrTooLarge, Reason: fmt.Sprintf("%d bytes, limit %d", len(b), MaxEventBytes)}
	}
	doc, err := parseObject(b)
	if err != nil {
		return Event{}, &EventError{Err: ErrInvalid, Reason: err.Error()}
	}
	e, err := decodeEnvelope(doc, b)
	if err != nil {
		return Event{}, err
	}
	if reg == nil {
		return e, nil
	}
	if err := reg.check(e, doc["data"]); err != nil {
		if errors.Is(err, ErrUnknownKind) || errors.Is(err, ErrUnknownVersion) {
			return e, err // reported, never dropped: the envelope is valid
		}
		return Event{}, err
	}
	return e, nil
}

func decodeEnvelope(doc map[string]any, b []byte) (Event, error) {
	partial := func() *EventError {
		e := &EventError{Err: ErrInvalid}
		e.SessionID, _ = doc["sessionId"].(string)
		e.Kind, _ = doc["kind"].(string)
		return e
	}
	if err := eventEnvelope().check(doc); err != nil {
		e := partial()
		e.Reason = err.Error()
		return Event{}, e
	}
	var e Event
	if err := unmarshalStrict(b, &e); err != nil {
		pe := partial()
		pe.Reason = err.Error()
		return Event{}, pe
	}
	e = normalizeEvent(e)
	if err := e.validateEnvelope(); err != nil {
		return Event{}, err
	}
	return e, nil
}

func (e *Event) validateEnvelope() error {
	switch {
	case len(e.SessionID) > 128 || !idChars(e.SessionID):
		return e.fail(ErrInvalid, "sessionId %q must match [A-Za-z0-9_-]{1,128}", e.SessionID)
	case e.Seq < 1:
		return e.fail(ErrInvalid, "seq must be positive")
	case e.V < 1:
		return e.fail(ErrInvalid, "v must be positive")
	case len(e.Kind) > 64 || !validEventKind(e.Kind):
		return e.fail(ErrInvalid, "kind %q must match %s (at most 64 bytes)", e.Kind, eventKindPattern)
	case !isObject(e.Data):
		return e.fail(ErrInvalid, "data must be a JSON object")
	}
	if err := runeLen("ownerRunId", e.OwnerRunID, 128); err != nil {
		return e.fail(ErrInvalid, "%v", err)
	}
	if err := validDeployment(e.DeploymentID); err != nil {
		return e.fail(ErrInvalid, "deploymentId: %v", err)
	}
	if err := validTime("time", e.Time); err != nil {
		return e.fail(ErrInvalid, "%v", err)
	}
	if len(e.Data) > MaxEventDataBytes {
		return e.fail(ErrTooLarge, "data is %d bytes, limit %d", len(e.Data), MaxEventDataBytes)
	}
	return nil
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

func (e *Event) fail(sentinel error, format string, args ...any) *EventError {
	return &EventError{
		SessionID: e.SessionID, Seq: e.Seq, Kind: e.Kind, V: e.V,
		Err: sentinel, Reason: fmt.Sprintf(format, args...),
	}
}

// normalizeEvent puts the time in UTC and compacts data (nil becomes {}).
func normalizeEvent(e Event) Event {
	e.Time = e.Time.UTC()
	if len(e.Data) == 0 {
		e.Data = json.RawMessage("{}")
	} else {
		e.Data = compactRaw(e.Data)
	}
	return e
}
