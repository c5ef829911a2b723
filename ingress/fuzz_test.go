package ingress

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

var deliverySeeds = []string{
	`{"alias":"C123.456","text":"hi"}`,
	`{"sessionId":"01J0000000000000000000000A","payloads":[{"message":[{"type":"text","text":"a"}]}],"mode":"steer"}`,
	`{"alias":"a","text":"x","caller":"bob","idempotencyKey":"k","timeout":"1h"}`,
	`{"alias":"a","payloads":[{"message":"x","context":["c"],"ext":{"slack":{"ts":"1"}}}]}`,
	`{"alias":"a","text":"x","acceptedDeploymentId":"v9"}`,
	`{"ALIAS":"a","text":"x"}`,
	`{"alias":"a","text":"x","text":"y"}`,
	`{"alias":"a","payloads":[{}]}`,
	`{"alias":null}`, `{`, `[]`, ``, `{"alias":"a","text":"x"} 1`,
	`{"alias":"a","text":"x","mode":"debounce","debounce":"3s"}`, `{"alias":"a","text":"x","mode":"interrupt"}`,
	`{"alias":"a","text":"x","mode":"debounce"}`, `{"alias":"a","text":"x","debounce":"1s"}`,
}

// FuzzParseDelivery: the parser never panics; what it accepts has exactly
// one target and a delivery, and its command either encodes — stamped with
// the ingress's deployment whatever the body said, and decodable by an
// owner — or is refused as a client error (400/413), never anything else.
func FuzzParseDelivery(f *testing.F) {
	for _, s := range deliverySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseDelivery(b, Limits{})
		if err != nil {
			clientError(t, err)
			return
		}
		if (r.SessionID == "") == (r.Alias == "") {
			t.Fatalf("target: %+v", r)
		}
		if r.SessionID != "" && subjects.ValidateSessionID(r.SessionID) != nil {
			t.Fatalf("bad session ID %q accepted", r.SessionID)
		}
		if r.Alias != "" {
			if _, err := subjects.EncodeToken(r.Alias); err != nil {
				t.Fatalf("alias %q accepted: %v", r.Alias, err)
			}
		}
		if r.Kind != wire.KindDeliver || len(r.Payloads) == 0 || len(r.Payloads) > DefaultMaxPayloads ||
			r.Mode != "" && !wire.ValidMode(r.Mode) || (r.Mode == wire.ModeDebounce) != (r.DebounceMs != 0) {
			t.Fatalf("delivery: %+v", r)
		}
		checkCommand(t, r)
	})
}

// FuzzParseCreate: as FuzzParseDelivery for POST /v1/sessions.
func FuzzParseCreate(f *testing.F) {
	for _, s := range append(deliverySeeds, `{}`, `{"alias":"x","timeout":"30m"}`, `{"timeout":"-1s"}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseCreate(b, Limits{})
		if err != nil {
			clientError(t, err)
			return
		}
		if r.SessionID != "" || r.Kind != "" && r.Kind != wire.KindDeliver {
			t.Fatalf("create: %+v", r)
		}
		if r.Timeout != "" {
			if d, err := time.ParseDuration(r.Timeout); err != nil || d <= 0 {
				t.Fatalf("timeout %q accepted", r.Timeout)
			}
		}
		if r.Kind != "" {
			checkCommand(t, r)
		}
	})
}

// FuzzParseSessionOp: the NATS forms of cancel/reset/clear/compact, input
// and authorize, and status.
func FuzzParseSessionOp(f *testing.F) {
	for i, s := range []string{
		`{"sessionId":"01J0000000000000000000000A"}`,
		`{"sessionId":"01J0000000000000000000000A","requestId":"r","value":{"a":1}}`,
		`{"sessionId":"01J0000000000000000000000A","attemptId":"a","result":"granted","data":[1]}`,
		`{"sessionId":"x.y"}`, `{"requestId":"r"}`, `{"sessionId":"S","caller":""}`,
	} {
		f.Add([]byte(s), byte(i))
	}
	f.Fuzz(func(t *testing.T, b []byte, op byte) {
		var r Request
		var err error
		switch op % 4 {
		case 0:
			r, err = ParseControl(b, []wire.Kind{wire.KindCancel, wire.KindReset, wire.KindClear, wire.KindCompact}[op/4%4], "", Limits{})
		case 1:
			r, err = ParseInput(b, "", Limits{})
		case 2:
			r, err = ParseAuthorize(b, "", Limits{})
		case 3:
			r.SessionID, err = ParseStatus(b, Limits{})
		}
		if err != nil {
			clientError(t, err)
			return
		}
		if subjects.ValidateSessionID(r.SessionID) != nil {
			t.Fatalf("bad session ID %q accepted", r.SessionID)
		}
		if r.Kind != "" {
			checkCommand(t, r)
		}
	})
}

func clientError(t *testing.T, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrBadRequest) && !errors.Is(err, ErrTooLarge) || e.Message == "" {
		t.Fatalf("refusal %v is not a 400/413 *Error", err)
	}
}

// checkCommand: the command of an accepted request encodes, or is refused
// as the client's fault; an encoded one decodes as an owner reads it.
func checkCommand(t *testing.T, r Request) {
	t.Helper()
	c := r.command("v1", time.Unix(1700000000, 0))
	c.ID = "c1"
	b, err := encode(wire.CurrentVersion, "v1", c)
	if err != nil {
		clientError(t, err)
		return
	}
	got, err := wire.Decode(b)
	if err != nil {
		t.Fatalf("an owner cannot decode %s: %v", b, err)
	}
	if got.AcceptedDeploymentID != "v1" || got.Kind != r.Kind || got.IdempotencyKey != r.IdempotencyKey || got.Caller != r.Caller {
		t.Fatalf("decoded %+v from request %+v", got, r)
	}
}
