package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// session.ended is written at the lowest data version that expresses the
// end (LowestSessionEndedBy): version 4 only when who ended it or their
// message is set, or for reason idle_expired; every other end keeps the
// version LowestSessionEnded gives it, byte for byte.
func TestSessionEndedByVersions(t *testing.T) {
	reg := DefaultEvents()
	for _, tt := range []struct {
		reason, by, message string
		want                int
		data                string
	}{
		{EndDone, "", "", 1, `{"reason":"done"}`},
		{EndExpired, "", "", 1, `{"reason":"expired"}`},
		{EndFailed, "", "", 1, `{"reason":"failed"}`},
		{EndCancelled, "", "", 1, `{"reason":"cancelled"}`},
		{EndTerminated, "", "", 2, `{"reason":"terminated"}`},
		{EndClosed, "", "", 3, `{"reason":"closed"}`},
		{EndIdleExpired, "", "", 4, `{"reason":"idle_expired"}`},
		{EndTerminated, EndedByUser, "", 4, `{"reason":"terminated","by":"user"}`},
		{EndTerminated, EndedByUser, "Thanks, Zoë.", 4, `{"reason":"terminated","by":"user","message":"Thanks, Zoë."}`},
		{EndTerminated, EndedByAdmin, "", 4, `{"reason":"terminated","by":"admin"}`},
		{EndCancelled, "", "no longer needed", 4, `{"reason":"cancelled","message":"no longer needed"}`},
	} {
		body := LowestSessionEndedBy(tt.reason, tt.by, tt.message)
		e, err := NewBodyEvent(body)
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind != EventSessionEnded || e.V != tt.want || string(e.Data) != tt.data {
			t.Errorf("%s/%s/%q: %s v%d %s, want v%d %s", tt.reason, tt.by, tt.message, e.Kind, e.V, e.Data, tt.want, tt.data)
		}
		if tt.by == "" && tt.message == "" && DataVersionOf(LowestSessionEnded(tt.reason)) != tt.want {
			t.Errorf("%s: LowestSessionEnded and LowestSessionEndedBy disagree", tt.reason)
		}
		e.SessionID, e.Seq, e.OwnerRunID, e.DeploymentID, e.Time = "s", 1, "run", "dep", envelope(e.Kind, nil).Time
		raw, err := EncodeEvent(reg, e)
		if err != nil {
			t.Errorf("%s at data version %d: %v", tt.data, e.V, err)
			continue
		}
		back, err := DecodeEvent(reg, raw)
		if err != nil || !bytes.Equal(back.Data, e.Data) {
			t.Errorf("%s: round trip %s %v", tt.data, back.Data, err)
		}
	}
	if reg.Version(EventSessionEnded) != 4 {
		t.Errorf("session.ended newest data version %d, want 4", reg.Version(EventSessionEnded))
	}
	d, err := DecodeData[SessionEndedV4](envelope(EventSessionEnded, SessionEndedV4{Reason: EndTerminated, By: EndedByUser, Message: "bye"}))
	if err != nil || d != (SessionEndedV4{Reason: EndTerminated, By: EndedByUser, Message: "bye"}) {
		t.Errorf("DecodeData: %+v %v", d, err)
	}
}

// endedV4Malformed are data version 4 data a registry-aware reader refuses
// (also part of the corpus of TestEventSchemaAgreement).
var endedV4Malformed = []string{
	`{}`,
	`{"reason":"bored"}`,
	`{"reason":"terminated","by":"robot"}`,
	`{"reason":"terminated","by":""}`,
	`{"reason":"terminated","by":null}`,
	`{"reason":"terminated","by":"User"}`,
	`{"reason":"terminated","message":""}`,
	`{"reason":"terminated","message":null}`,
	`{"reason":"terminated","message":1}`,
	`{"reason":"terminated","message":"` + strings.Repeat("m", MaxEndMessageBytes+1) + `"}`,
	`{"reason":"terminated","message":"` + strings.Repeat("é", MaxEndMessageBytes/2+1) + `"}`,
	`{"reason":"terminated","message":"` + strings.Repeat("é", MaxEndMessageBytes+1) + `"}`,
	`{"reason":"terminated","Message":"bye"}`,
	`{"reason":"terminated","who":"user"}`,
}

// endedV4Valid are data version 4 data every reader accepts (also part of
// the corpus of TestEventSchemaAgreement).
var endedV4Valid = []string{
	`{"reason":"idle_expired"}`,
	`{"reason":"done","by":"admin"}`,
	`{"message":"a\u00e9\n\"b","reason":"terminated","by":"user"}`,
	`{"reason":"terminated","message":"` + strings.Repeat("é", MaxEndMessageBytes/2) + `"}`,
	`{"reason":"terminated","message":"` + strings.Repeat("m", MaxEndMessageBytes) + `"}`,
	`{"reason":"terminated","by":"user","by":"admin"}`, // the last one, as the reference reads it
}

// rawEventV is rawEvent at data version v.
func rawEventV(kind string, v int, data string) []byte {
	return bytes.Replace(rawEvent(kind, data), []byte(`"v":1,`), []byte(`"v":`+itoa(v)+`,`), 1)
}

// The data of session.ended version 4 is checked: its reasons, by (user
// or admin, not empty when present) and message (not empty when present,
// at most MaxEndMessageBytes bytes of UTF-8), on encode and on decode.
func TestSessionEndedV4Data(t *testing.T) {
	reg := DefaultEvents()
	for _, data := range endedV4Malformed {
		if _, err := DecodeEvent(reg, rawEventV(EventSessionEnded, 4, data)); !errors.Is(err, ErrInvalid) {
			t.Errorf("decode %s: err = %v, want ErrInvalid", data, err)
		}
	}
	for _, data := range endedV4Valid {
		if _, err := DecodeEvent(reg, rawEventV(EventSessionEnded, 4, data)); err != nil {
			t.Errorf("decode %s: %v", data, err)
		}
	}
	for _, d := range []SessionEndedV4{
		{Reason: "bored"},
		{Reason: EndTerminated, By: "robot"},
		{Reason: EndTerminated, Message: strings.Repeat("é", MaxEndMessageBytes/2+1)},
		{Reason: EndTerminated, Message: "bye\xff" + strings.Repeat("m", MaxEndMessageBytes-3)},
	} {
		e := envelope(EventSessionEnded, d)
		e.V = 4
		if _, err := EncodeEvent(reg, e); !errors.Is(err, ErrInvalid) {
			t.Errorf("encode %+v: err = %v, want ErrInvalid", d, err)
		}
	}
	// Version 3 knows neither idle_expired nor by nor message.
	for _, data := range []string{`{"reason":"idle_expired"}`, `{"reason":"terminated","by":"user"}`} {
		if _, err := DecodeEvent(reg, rawEventV(EventSessionEnded, 3, data)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s at data version 3: err = %v, want ErrInvalid", data, err)
		}
	}
}

// A reader that knows only data versions 1 to 3 of session.ended (the
// previous build) meets the frozen version 4: it gets the event, envelope
// validated, with ErrUnknownVersion, and passes it through unchanged.
func TestOlderReaderPassesSessionEndedV4(t *testing.T) {
	old := NewEventRegistry()
	if err := errors.Join(
		registerBuiltin(old, EventSessionEnded, func(SessionEnded) error { return nil }),
		registerBuiltinV(old, EventSessionEnded, 2, func(SessionEndedV2) error { return nil }),
		registerBuiltinV(old, EventSessionEnded, 3, func(SessionEndedV3) error { return nil }),
	); err != nil {
		t.Fatal(err)
	}
	b := bytes.TrimSuffix(readFile(t, "testdata/events/fixtures/session.ended.v4.json"), []byte("\n"))
	e, err := DecodeEvent(old, b)
	if !errors.Is(err, ErrUnknownVersion) || e.V != 4 {
		t.Fatalf("older reader: %+v %v", e, err)
	}
	if out, err := EncodeEvent(nil, e); err != nil || !bytes.Equal(out, b) {
		t.Fatalf("passed through as %s (%v)", out, err)
	}
	d, err := DecodeData[SessionEndedV4](e)
	if err != nil || d.Reason != EndTerminated || d.By != EndedByUser || d.Message == "" {
		t.Fatalf("fixture data %+v, %v", d, err)
	}
}
