package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The typed path of Decode. A document that declares "v":5 (the current
// version), "v":4, "v":3, "v":2 or "v":1 (which the later versions only
// extend)
// is read straight into Command by a strict standard decoder,
// go-json-experiment/json (the encoding/json/v2 of the Go project, which
// Go 1.26 keeps behind GOEXPERIMENT=jsonv2): exact, case-sensitive member
// names, a repeated member name refused, no unknown member outside the raw
// JSON of ext and friends, no invalid UTF-8, one value and nothing after
// it. strictDecode
// adds what the schema (or the reference's encoding/json) says and the
// decoder does not: no null where the schema wants a value, no optional
// member present with the value that reads as its absence, and a time read
// from its undecoded token. The Go rules (validate.go), at least as strict
// as the frozen schema, then decide the value. No generic map and no
// schema validator run on this path.
//
// The typed path only ever accepts. Everything else goes to the reference
// path (decodeReference: generic parse, migration chain, schema, Go rules),
// which produces the typed error or handles what the typed path declines:
// version-0 documents, version-1 to version-4 documents that use what
// only a later version has or lack a delivery's mode (the migrations
// reject them), member
// names that repeat (whose last-wins meaning only the generic parse
// states), a tag body's present but empty set or remove, an empty
// terminate body on another kind, and escapes of lone
// surrogates (which encoding/json turns into U+FFFD). TestSchemaAgreement
// and FuzzSchemaAgreement hold the two paths to the same verdict and value.

// verdict is the outcome of a typed path.
type verdict uint8

const (
	declined verdict = iota // the reference path decides (and words any error)
	accepted
)

// errNull refuses a null where the schema wants a value; the reference
// path words the rejection.
var errNull = errors.New("null")

// noNull refuses a JSON null for values of type T and leaves every other
// value to the decoder's own rules.
func noNull[T any]() *jsonv2.Unmarshalers {
	return jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, _ *T) error {
		if dec.PeekKind() == 'n' {
			return errNull
		}
		return errors.ErrUnsupported // the decoder's own rules
	})
}

// zeroMeansAbsent are the members (as JSON Pointers into a command) whose
// zero value Command cannot tell from their absence, while the schema
// refuses it when present (minLength 1, minimum 1).
var zeroMeansAbsent = map[jsontext.Pointer]bool{
	"/idempotencyKey": true, "/caller": true, "/parentSessionId": true, "/handle": true, "/depth": true,
	"/taskResult/error": true, "/childResult/error": true, "/childResult/ended": true,
	"/childWaiting/requestId": true, "/childWaiting/attemptId": true,
	"/childResumed/requestId": true, "/childResumed/attemptId": true,
	"/terminate/message": true,
	"/deliver/mode":      true, "/deliver/debounceMs": true, "/configure/defaultDebounceMs": true,
}

// errZero refuses a present zero value of a zeroMeansAbsent member.
var errZero = errors.New("present but zero")

// unmarshalString reads a string (never null), refusing "" for the
// members whose "" would read as absent.
func unmarshalString(dec *jsontext.Decoder, s *string) error {
	if dec.PeekKind() != '"' {
		return errNull // null, or not a string
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if *s = tok.String(); *s == "" && zeroMeansAbsent[dec.StackPointer()] {
		return errZero
	}
	return nil
}

// unmarshalInt reads an int as encoding/json does (strconv.Atoi of the
// literal: no fraction, no exponent), refusing 0 for the members whose 0
// would read as absent.
func unmarshalInt(dec *jsontext.Decoder, n *int) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	if v.Kind() != '0' {
		return errNull // null, or not a number
	}
	if *n, err = strconv.Atoi(string(v)); err != nil {
		return err
	}
	if *n == 0 && zeroMeansAbsent[dec.StackPointer()] {
		return errZero
	}
	return nil
}

// unmarshalInt64 is unmarshalInt for an int64 (strconv.ParseInt of the
// literal, as encoding/json reads it).
func unmarshalInt64(dec *jsontext.Decoder, n *int64) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	if v.Kind() != '0' {
		return errNull // null, or not a number
	}
	if *n, err = strconv.ParseInt(string(v), 10, 64); err != nil {
		return err
	}
	if *n == 0 && zeroMeansAbsent[dec.StackPointer()] {
		return errZero
	}
	return nil
}

// unmarshalTime reads a time (never null) as timeToken does.
func unmarshalTime(dec *jsontext.Decoder, t *time.Time) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	if !timeToken(v, t) {
		return errNull // null, or not such a time
	}
	return nil
}

// timeToken reads a time as encoding/json does, from the undecoded string
// token (so an escaped character is refused), held to RFC 3339 as the
// schema's date-time format is: the decoder's own time format adds that to
// time.Time's parser (two-digit hours, a period before the fraction,
// offsets within 23:59).
func timeToken(v jsontext.Value, t *time.Time) bool {
	return v.Kind() == '"' && bytes.IndexByte(v, '\\') < 0 && jsonv2.Unmarshal(v, t) == nil
}

// strictDecode is the decoder's configuration: unknown members refused
// (names are exact and may not repeat by default), null refused for every
// type of Command and Event except raw JSON (json.RawMessage, where the
// schema allows anything), a present zero refused where it would read as
// absent, and Message read as its union.
var strictDecode = jsonv2.JoinOptions(
	jsonv2.RejectUnknownMembers(true),
	jsonv2.WithUnmarshalers(jsonv2.JoinUnmarshalers(
		jsonv2.UnmarshalFromFunc(unmarshalMessage),
		jsonv2.UnmarshalFromFunc(unmarshalString), jsonv2.UnmarshalFromFunc(unmarshalInt),
		jsonv2.UnmarshalFromFunc(unmarshalInt64),
		noNull[Kind](), noNull[bool](),
		noNull[uint64](), noNull[float64](), jsonv2.UnmarshalFromFunc(unmarshalTime),
		noNull[*Deliver](), noNull[*InputResponse](), noNull[*AuthCallback](),
		noNull[*TaskResult](), noNull[*Timeout](), noNull[*Move](),
		noNull[*ChildResult](), noNull[*ChildWaiting](), noNull[*Tag](), noNull[*Terminate](), noNull[*Configure](), noNull[*Message](),
		noNull[Payload](), noNull[InputResponse](), noNull[Part](), noNull[Usage](),
		noNull[[]Payload](), noNull[[]InputResponse](), noNull[[]Part](), noNull[[]string](),
		noNull[map[string]json.RawMessage](), noNull[map[string]string](),
	)),
)

// unmarshalMessage reads the Message union (a string, or an array of
// parts) under the same strict rules; Message.UnmarshalJSON would read the
// parts with encoding/json, which folds the case of member names.
func unmarshalMessage(dec *jsontext.Decoder, m *Message) error {
	switch dec.PeekKind() {
	case '"':
		*m = Message{}
		return jsonv2.UnmarshalDecode(dec, &m.Text)
	case '[':
		*m = Message{Parts: []Part{}}
		return jsonv2.UnmarshalDecode(dec, &m.Parts)
	}
	return errNull // null, or not a message: the reference path words it
}

// decodeFast reads a version-1 to version-5 command as the current
// version. It returns accepted with the normalized,
// validated command, or declined for the reference path.
func decodeFast(b []byte) (Command, verdict) {
	var c Command
	if jsonv2.Unmarshal(b, &c, strictDecode) != nil {
		return Command{}, declined
	}
	switch {
	case c.V < 1 || c.V > 5:
		return Command{}, declined // version 0, or another version
	case c.V == 1 && c.expressibleInV1() != nil:
		return Command{}, declined // a later migration words the rejection
	case c.V == 2 && c.expressibleInV2() != nil:
		return Command{}, declined // a later migration words the rejection
	case c.V == 3 && c.expressibleInV3() != nil:
		return Command{}, declined // the 3→4 or 4→5 migration words the rejection
	case c.V == 4 && c.expressibleInV4() != nil:
		return Command{}, declined // the 4→5 migration words the rejection
	case c.V < BusyVersion && c.Deliver != nil && c.Deliver.Mode == "":
		return Command{}, declined // versions 1 to 4 require a mode (the 4→5 migration)
	}
	c.V = CurrentVersion
	if !normalizeDecoded(&c) || c.validate() != nil {
		return Command{}, declined
	}
	return c, accepted
}

// normalizeDecoded is normalizeCommand for a command decodeFast built: its
// values are fresh, so they are normalized in place. It reports false when
// a required raw member (an input response's value) is absent: the decoder
// leaves it nil, which the Go rules would read as null.
func normalizeDecoded(c *Command) bool {
	ok := true
	value := func(r *InputResponse) {
		ok = ok && r.Value != nil
		r.Value = compactRaw(r.Value)
	}
	c.AcceptedAt = c.AcceptedAt.UTC()
	if c.Deliver != nil {
		for i := range c.Deliver.Payloads {
			p := &c.Deliver.Payloads[i]
			p.Context = nilIfEmpty(p.Context)
			p.InputResponses = nilIfEmpty(p.InputResponses)
			for j := range p.InputResponses {
				value(&p.InputResponses[j])
			}
			p.OutputSchema = compactRaw(p.OutputSchema)
			if len(p.Ext) == 0 {
				p.Ext = nil
			}
			for k, v := range p.Ext {
				p.Ext[k] = compactOrNull(v)
			}
		}
	}
	if c.InputResponse != nil {
		value(c.InputResponse)
	}
	if a := c.AuthCallback; a != nil {
		a.Data = compactRaw(a.Data)
	}
	if t := c.TaskResult; t != nil {
		t.Result = compactRaw(t.Result)
	}
	if c.Timeout != nil {
		c.Timeout.Deadline = c.Timeout.Deadline.UTC()
	}
	if c.ChildResult != nil {
		c.ChildResult.Outputs = nilIfEmpty(c.ChildResult.Outputs)
	}
	if t := c.Tag; t != nil {
		// The schema refuses a present but empty set or remove; the
		// decoder reads them as non-nil and empty.
		ok = ok && (t.Set == nil || len(t.Set) > 0) && (t.Remove == nil || len(t.Remove) > 0)
	}
	if t := c.Terminate; t != nil && t.Message == "" && c.Kind == KindTerminate {
		c.Terminate = nil // {}: a terminate without a message (normalizeTerminate)
	}
	return ok
}

// decodeEventFast reads an event envelope. It returns accepted with the
// normalized, validated event, or declined for the reference path.
func decodeEventFast(b []byte) (Event, verdict) {
	var e Event
	if jsonv2.Unmarshal(b, &e, strictDecode) != nil || e.Data == nil {
		return Event{}, declined // every member is required; data is never absent
	}
	e = normalizeEvent(e) // absent members are zero: the Go rules refuse them
	if e.validateEnvelope() != nil {
		return Event{}, declined
	}
	return e, accepted
}
