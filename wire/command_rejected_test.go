package wire

import (
	"bytes"
	"errors"
	"testing"
)

// command.rejected: built from its typed body at data version 1, its data
// checked (commandId non-empty, seq positive, reason non-empty), and
// round-tripped through the event codec.
func TestCommandRejected(t *testing.T) {
	reg := DefaultEvents()
	e, err := NewBodyEvent(CommandRejected{CommandID: "c5", Seq: 51, Reason: RejectAgentMismatch})
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != EventCommandRejected || e.V != 1 || string(e.Data) != `{"commandId":"c5","seq":51,"reason":"agent_mismatch"}` {
		t.Fatalf("built %s v%d %s", e.Kind, e.V, e.Data)
	}
	if err := reg.ValidateData(e.Kind, e.Data); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []CommandRejected{
		{Seq: 51, Reason: RejectAgentMismatch},
		{CommandID: "c5", Reason: RejectAgentMismatch},
		{CommandID: "c5", Seq: 51},
	} {
		b, err := NewBodyEvent(bad)
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.ValidateData(b.Kind, b.Data); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", b.Data, err)
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
// registry predates command.rejected gets the event, envelope validated,
// with ErrUnknownKind, and passes it through unchanged.
func TestOlderReaderPassesCommandRejected(t *testing.T) {
	old := NewEventRegistry()
	if err := registerBuiltin(old, EventCommandApplied, func(CommandApplied) error { return nil }); err != nil {
		t.Fatal(err)
	}
	b := bytes.TrimSuffix(readFile(t, "testdata/events/fixtures/command.rejected.v1.json"), []byte("\n"))
	e, err := DecodeEvent(old, b)
	if !errors.Is(err, ErrUnknownKind) || e.Kind != EventCommandRejected || e.V != 1 {
		t.Fatalf("older reader: %+v %v", e, err)
	}
	if out, err := EncodeEvent(nil, e); err != nil || !bytes.Equal(out, b) {
		t.Fatalf("passed through as %s (%v)", out, err)
	}
}
