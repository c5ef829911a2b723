package wire

import (
	"bytes"
	"errors"
	"testing"
)

// turn.step_retried: built from its typed body at data version 1, its data
// checked (turnId and code non-empty, step positive, attempt 2 or more),
// and round-tripped through the event codec.
func TestTurnStepRetried(t *testing.T) {
	reg := DefaultEvents()
	e, err := NewBodyEvent(TurnStepRetried{TurnID: "t1", Step: 2, Attempt: 2, Code: CodeAgentTimeout})
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != EventTurnStepRetried || e.V != 1 || string(e.Data) != `{"turnId":"t1","step":2,"attempt":2,"code":"agent_timeout"}` {
		t.Fatalf("built %s v%d %s", e.Kind, e.V, e.Data)
	}
	if err := reg.ValidateData(e.Kind, e.Data); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []TurnStepRetried{
		{Step: 2, Attempt: 2, Code: CodeAgentTimeout},
		{TurnID: "t1", Attempt: 2, Code: CodeAgentTimeout},
		{TurnID: "t1", Step: 2, Attempt: 1, Code: CodeAgentTimeout},
		{TurnID: "t1", Step: 2, Code: CodeAgentTimeout},
		{TurnID: "t1", Step: 2, Attempt: 3},
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
// registry predates turn.step_retried gets the event, envelope validated,
// with ErrUnknownKind, and passes it through unchanged.
func TestOlderReaderPassesStepRetried(t *testing.T) {
	old := NewEventRegistry()
	if err := registerBuiltin(old, EventTurnStep, func(TurnStep) error { return nil }); err != nil {
		t.Fatal(err)
	}
	b := bytes.TrimSuffix(readFile(t, "testdata/events/fixtures/turn.step_retried.v1.json"), []byte("\n"))
	e, err := DecodeEvent(old, b)
	if !errors.Is(err, ErrUnknownKind) || e.Kind != EventTurnStepRetried || e.V != 1 {
		t.Fatalf("older reader: %+v %v", e, err)
	}
	if out, err := EncodeEvent(nil, e); err != nil || !bytes.Equal(out, b) {
		t.Fatalf("passed through as %s (%v)", out, err)
	}
}
