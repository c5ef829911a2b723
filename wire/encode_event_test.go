package wire

import (
	"bytes"
	"encoding/json"
	"testing"
)

// encodeEventReference is EncodeEvent as it was before the typed check:
// the encoding decoded back by DecodeEvent, which decides.
func encodeEventReference(reg *EventRegistry, e Event) ([]byte, error) {
	e = normalizeEvent(e)
	b, err := marshal(e)
	if err != nil {
		return nil, e.fail(ErrInvalid, "marshal: %v", err)
	}
	if _, err := DecodeEvent(reg, b); err != nil {
		return nil, err
	}
	return b, nil
}

// agreeEncodeEvent fails t unless EncodeEvent and the reference agree on e
// for every registry (nil included): the same bytes, or an error of the
// same sentinel (a schema's wording lists members in no fixed order). It
// returns whether the typed check accepted e for every registry.
func agreeEncodeEvent(t testing.TB, regs []*EventRegistry, e Event) bool {
	t.Helper()
	fast := true
	for _, reg := range append([]*EventRegistry{nil}, regs...) {
		got, err := EncodeEvent(reg, e)
		want, refErr := encodeEventReference(reg, e)
		switch {
		case (err == nil) != (refErr == nil):
			t.Fatalf("EncodeEvent: %v, reference: %v\nevent %+v", err, refErr, e)
		case !sameSentinel(err, refErr):
			t.Fatalf("EncodeEvent: %v\nreference: %v\nevent %+v", err, refErr, e)
		case !bytes.Equal(got, want):
			t.Fatalf("EncodeEvent wrote %s\nreference %s", got, want)
		}
		n := normalizeEvent(e)
		b, _ := marshal(n)
		fast = fast && acceptsEncoded(reg, &n, len(b))
	}
	return fast
}

// looseEvent reads b into an Event the way a careless producer could
// build one: unknown members ignored, nothing validated.
func looseEvent(b []byte) (Event, bool) {
	var e Event
	return e, json.Unmarshal(b, &e) == nil
}

// TestEncodeEventAgrees: EncodeEvent, which checks the event it encodes
// with the typed rules and decodes its encoding only when they do not
// accept it, accepts and refuses exactly what decoding every encoding
// did — over the event corpus (every fixture of every kind and its
// mutations), read loosely into events, valid and not.
func TestEncodeEventAgrees(t *testing.T) {
	t.Parallel() // pure functions of immutable inputs
	regs := agreeRegistries(t)
	fast, slow := 0, 0
	for i, b := range eventCorpus(t) {
		if !checked(i) {
			continue
		}
		e, ok := looseEvent(b)
		if !ok {
			continue
		}
		if agreeEncodeEvent(t, regs, e) {
			fast++
		} else {
			slow++
		}
	}
	t.Logf("typed check accepted %d events, left %d to the decode", fast, slow)
	if fast < 20 || slow < 100 {
		t.Fatalf("the corpus does not exercise both paths: %d accepted, %d left to the decode", fast, slow)
	}
}

// FuzzEncodeEventAgrees: the same for any event, with any owner run ID
// (invalid UTF-8 included: encoding coerces it) and any data bytes.
func FuzzEncodeEventAgrees(f *testing.F) {
	for i, b := range eventCorpus(f) {
		if seeded(i) {
			f.Add(b, "", []byte(nil))
		}
	}
	f.Add(rawEvent(EventMessageOutput, `{"turnId":"t1","text":"hi"}`), "run-\xff", []byte(`{"turnId":"t1","text":"a","text":"b"}`))
	f.Add(rawEvent("acme.plain", `{"note":"x"}`), "", []byte(`{"note":"x","labels":{"a":"1","a":"2"}}`))
	regs := agreeRegistries(f)
	f.Fuzz(func(t *testing.T, b []byte, owner string, data []byte) {
		e, ok := looseEvent(b)
		if !ok {
			return
		}
		if owner != "" {
			e.OwnerRunID = owner
		}
		if len(data) > 0 {
			e.Data = data
		}
		agreeEncodeEvent(t, regs, e)
	})
}
