package wire_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/wire"
)

func TestLiveRoundTrip(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	msg, err := wire.EncodeLive("s1", "v1", at, wire.MessageDelta{TurnID: "t3", Step: 1, Text: "The "})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"sessionId":"s1","kind":"message.delta","time":"2026-12-01T09:00:00Z","deploymentId":"v1","data":{"turnId":"t3","step":1,"text":"The "}}`
	if string(msg) != want {
		t.Fatalf("EncodeLive = %s, want %s", msg, want)
	}
	l, err := wire.DecodeLive(msg)
	if err != nil || l.Kind != wire.EventMessageDelta || l.TurnID != "t3" || l.Step != 1 || l.SessionID != "s1" {
		t.Fatalf("DecodeLive = %+v, %v", l, err)
	}
	msg, _ = wire.EncodeLive("s1", "v1", at, wire.MessageDiscarded{TurnID: "t3", Step: 2})
	if l, err := wire.DecodeLive(msg); err != nil || l.Kind != wire.EventMessageDiscarded || l.Step != 2 {
		t.Fatalf("discarded: %+v, %v", l, err)
	}
	if _, err := wire.EncodeLive("s1", "v1", at, wire.TurnStep{TurnID: "t1", Step: 1}); !errors.Is(err, wire.ErrInvalid) {
		t.Fatalf("a durable body encoded live: %v", err)
	}
}

func TestDecodeLiveRefuses(t *testing.T) {
	for _, c := range []struct {
		name, msg string
		want      error
	}{
		{"not JSON", `{`, wire.ErrInvalid},
		{"no session", `{"kind":"message.delta","data":{"turnId":"t1","step":1,"text":"x"}}`, wire.ErrInvalid},
		{"no data", `{"sessionId":"s","kind":"message.delta"}`, wire.ErrInvalid},
		{"no turn", `{"sessionId":"s","kind":"message.delta","data":{"step":1,"text":"x"}}`, wire.ErrInvalid},
		{"step 0", `{"sessionId":"s","kind":"message.discarded","data":{"turnId":"t1","step":0}}`, wire.ErrInvalid},
		{"text not a string", `{"sessionId":"s","kind":"message.delta","data":{"turnId":"t1","step":1,"text":3}}`, wire.ErrInvalid},
		{"text too long", `{"sessionId":"s","kind":"message.delta","data":{"turnId":"t1","step":1,"text":"` + strings.Repeat("x", wire.MaxLiveTextBytes+1) + `"}}`, wire.ErrInvalid},
		{"unknown kind", `{"sessionId":"s","kind":"message.future","data":{"turnId":"t1","step":1}}`, wire.ErrUnknownKind},
	} {
		if _, err := wire.DecodeLive([]byte(c.msg)); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}
