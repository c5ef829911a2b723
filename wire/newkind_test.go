package wire

import (
	"bytes"
	"errors"
	"testing"
)

// checkNewKind builds body at data version 1 with data want, checks that
// the registry accepts it and refuses each of bad (ErrInvalid), and
// round-trips it through the event codec: the test of a kind added after
// the first shapes.
func checkNewKind(t *testing.T, body EventBody, want string, bad ...EventBody) {
	t.Helper()
	reg := DefaultEvents()
	e, err := NewBodyEvent(body)
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != body.EventKind() || e.V != 1 || string(e.Data) != want {
		t.Fatalf("built %s v%d %s, want v1 %s", e.Kind, e.V, e.Data, want)
	}
	if err := reg.ValidateData(e.Kind, e.Data); err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		be, err := NewBodyEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.ValidateData(be.Kind, be.Data); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", be.Data, err)
		}
	}
	e.SessionID, e.Seq, e.OwnerRunID, e.DeploymentID, e.Time = "s", 3, "run", "dep", envelope(e.Kind, nil).Time
	raw, err := EncodeEvent(reg, e)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeEvent(reg, raw)
	if err != nil || back.Kind != e.Kind || !bytes.Equal(back.Data, e.Data) {
		t.Fatalf("round trip: %+v %v", back, err)
	}
}

// A new kind needs no data version bump (VERSIONING.md): a reader whose
// registry predates it gets the event, envelope validated, with
// ErrUnknownKind, and passes it through unchanged.
func TestOlderReaderPassesNewKinds(t *testing.T) {
	old := NewEventRegistry()
	if err := registerBuiltin(old, EventCommandApplied, func(CommandApplied) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{EventCommandRejected, EventTurnStepRetried, EventSessionTagged, EventCommandSuperseded, EventTurnRolledBack} {
		b := bytes.TrimSuffix(readFile(t, "testdata/events/fixtures/"+kind+".v1.json"), []byte("\n"))
		e, err := DecodeEvent(old, b)
		if !errors.Is(err, ErrUnknownKind) || e.Kind != kind || e.V != 1 {
			t.Fatalf("older reader of %s: %+v %v", kind, e, err)
		}
		if out, err := EncodeEvent(nil, e); err != nil || !bytes.Equal(out, b) {
			t.Fatalf("%s passed through as %s (%v)", kind, out, err)
		}
	}
}
