package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// session.quarantined is written at data version 1 unless the outbox was
// lost (version 2, with the stored checkpoint's reference); version 1
// refuses the new members, version 2 refuses a quarantine that lost
// nothing or names no valid reference; the registry keeps both schemas,
// and a reader that knows only version 1 passes version 2 through.
func TestSessionQuarantinedVersions(t *testing.T) {
	reg := DefaultEvents()
	q := SessionQuarantined{Attempts: 2, Error: "process_died", DeploymentID: "dep-1"}
	body := LowestSessionQuarantined(q, nil)
	if DataVersionOf(body) != 1 || body != EventBody(q) {
		t.Fatalf("nothing lost: %T at data version %d, want version 1", body, DataVersionOf(body))
	}
	lost := LowestSessionQuarantined(q, &ref)
	if DataVersionOf(lost) != 2 || lost.EventKind() != EventSessionQuarantined {
		t.Fatalf("outbox lost: %T at data version %d, want version 2", lost, DataVersionOf(lost))
	}
	for _, b := range []EventBody{body, lost} {
		e, err := NewBodyEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		e.SessionID, e.Seq, e.OwnerRunID, e.DeploymentID, e.Time = "s", 1, "run", "dep", envelope(e.Kind, nil).Time
		if _, err := EncodeEvent(reg, e); err != nil {
			t.Fatalf("v%d: %v", e.V, err)
		}
	}
	if e, _ := NewBodyEvent(lost); string(e.Data) != `{"attempts":2,"error":"process_died","deploymentId":"dep-1","outboxLost":true,"checkpointRef":`+
		`{"digest":"`+ref.Digest+`","size":11}}` {
		t.Fatalf("version 2 data %s", e.Data)
	}
	v1 := rawEvent(EventSessionQuarantined, `{"attempts":1,"error":"x","deploymentId":"d","outboxLost":true}`)
	if _, err := DecodeEvent(reg, v1); !errors.Is(err, ErrInvalid) {
		t.Errorf("outboxLost in data version 1 accepted: %v", err)
	}
	for _, data := range []string{
		`{"attempts":1,"error":"x","deploymentId":"d","outboxLost":false,"checkpointRef":{"digest":"` + ref.Digest + `","size":11}}`,
		`{"attempts":1,"error":"x","deploymentId":"d","outboxLost":true}`,
		`{"attempts":1,"error":"x","deploymentId":"d","outboxLost":true,"checkpointRef":{"digest":"sha256:00","size":11}}`,
	} {
		b := bytes.Replace(rawEvent(EventSessionQuarantined, data), []byte(`"v":1`), []byte(`"v":2`), 1)
		if _, err := DecodeEvent(reg, b); !errors.Is(err, ErrInvalid) {
			t.Errorf("version 2 %s accepted: %v", data, err)
		}
	}
	if reg.Version(EventSessionQuarantined) != 2 || reg.SchemaV(EventSessionQuarantined, 1) == nil ||
		bytes.Equal(reg.SchemaV(EventSessionQuarantined, 1), reg.Schema(EventSessionQuarantined)) {
		t.Errorf("registry does not keep both versions: newest %d", reg.Version(EventSessionQuarantined))
	}
	old := NewEventRegistry()
	if err := registerBuiltin(old, EventSessionQuarantined, func(SessionQuarantined) error { return nil }); err != nil {
		t.Fatal(err)
	}
	fx := bytes.TrimSuffix(readFile(t, "testdata/events/fixtures/session.quarantined.v2.json"), []byte("\n"))
	e, err := DecodeEvent(old, fx)
	if !errors.Is(err, ErrUnknownVersion) || e.V != 2 {
		t.Fatalf("older reader: %+v %v", e, err)
	}
	if out, err := EncodeEvent(nil, e); err != nil || !bytes.Equal(out, fx) {
		t.Fatalf("passed through as %s (%v)", out, err)
	}
}

// PeekOutbox reads an outbox whatever else the checkpoint holds (here a
// state version no build reads and a member no version has): envelopes
// validated, data passed through unchecked (an agent kind this reader
// does not know, a built-in kind's data this build would refuse);
// anything it cannot read is ErrInvalid, with the readable events.
func TestPeekOutbox(t *testing.T) {
	good := func(seq uint64, kind, data string) json.RawMessage {
		e := envelope(kind, nil)
		e.Seq, e.Data = seq, json.RawMessage(data)
		b, err := EncodeEvent(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	one, two := good(7, "acme.note", `{"n":1}`), good(8, EventTurnStep, `{"turnId":"t1","step":0}`)
	cp := func(outbox ...json.RawMessage) []byte {
		b, _ := json.Marshal(map[string]any{"stateV": 99, "futureMember": true, "outbox": outbox})
		return b
	}
	evs, err := PeekOutbox(cp(one, two), "sess-1")
	if err != nil || len(evs) != 2 || evs[0].Seq != 7 || evs[1].Seq != 8 || string(evs[1].Data) != `{"turnId":"t1","step":0}` {
		t.Fatalf("readable outbox: %+v %v", evs, err)
	}
	if evs, err := PeekOutbox([]byte(`{"stateV":99}`), "sess-1"); err != nil || evs != nil {
		t.Fatalf("no outbox: %+v %v", evs, err)
	}
	badEnvelope := json.RawMessage(`{"sessionId":"sess-1","seq":0,"kind":"x"}`)
	for name, b := range map[string][]byte{
		"not an object":   []byte(`"not a checkpoint"`),
		"not JSON":        []byte(`{"outbox":[`),
		"outbox a string": []byte(`{"outbox":"zzz"}`),
		"bad envelope":    cp(one, badEnvelope, two),
		"other session":   cp(one, two),
	} {
		id := "sess-1"
		if name == "other session" {
			id = "sess-2"
		}
		evs, err := PeekOutbox(b, id)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
		if name == "bad envelope" && (len(evs) != 2 || evs[0].Seq != 7 || evs[1].Seq != 8) {
			t.Errorf("%s: readable events %+v", name, evs)
		}
	}
}
