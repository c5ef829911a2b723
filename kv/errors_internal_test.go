package kv

import (
	"errors"
	"fmt"
	"testing"

	"github.com/baton-rt/baton/record"
	"github.com/nats-io/nats.go/jetstream"
)

// The server's two "wrong last sequence" answers, as nats.go returns them.
func wrongLastSeq(code jetstream.ErrorCode) *jetstream.APIError {
	return &jetstream.APIError{Code: 400, ErrorCode: code, Description: "wrong last sequence"}
}

func TestMapErrKV(t *testing.T) {
	for _, code := range []jetstream.ErrorCode{jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant} {
		// kv.Update and kv.Delete wrap the API error this way (nats.go mapRevisionMismatch).
		upstream := fmt.Errorf("%w: %w", wrongLastSeq(code), jetstream.ErrKeyRevisionMismatch)
		err := mapErr("update", "k", upstream)
		if !errors.Is(err, record.ErrConflict) || !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			t.Errorf("code %d: %v does not match both record.ErrConflict and the upstream error", code, err)
		}
	}
	if err := mapErr("get", "k", jetstream.ErrKeyNotFound); !errors.Is(err, record.ErrNotFound) || !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("not found: %v", err)
	}
	other := errors.New("boom")
	if err := mapErr("get", "k", other); errors.Is(err, record.ErrConflict) || errors.Is(err, record.ErrNotFound) || !errors.Is(err, other) {
		t.Errorf("other: %v", err)
	}
	if mapErr("get", "k", nil) != nil {
		t.Error("nil maps to nil")
	}
}

func TestMapPublishErr(t *testing.T) {
	for _, code := range []jetstream.ErrorCode{jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant} {
		// js.Publish returns the ack's API error wrapped by "nats: %w".
		err := mapPublishErr("write", "k", fmt.Errorf("nats: %w", wrongLastSeq(code)))
		if !errors.Is(err, record.ErrConflict) {
			t.Errorf("code %d: %v is not record.ErrConflict", code, err)
		}
	}
	big := &jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum}
	if err := mapPublishErr("write", "k", big); !errors.Is(err, record.ErrTooLarge) {
		t.Errorf("too large: %v", err)
	}
}

func TestOwnedErrorMatches(t *testing.T) {
	var err error = fmt.Errorf("claim: %w", &record.OwnedError{Key: "tok.a", SessionID: "s1", Revision: 3})
	if !errors.Is(err, record.ErrExists) || !errors.Is(err, record.ErrConflict) || errors.Is(err, record.ErrNotFound) {
		t.Fatalf("%v", err)
	}
	var oe *record.OwnedError
	if !errors.As(err, &oe) || oe.SessionID != "s1" {
		t.Fatalf("as: %v", err)
	}
	if got := oe.Error(); got != "record: tok.a is taken by session s1 at revision 3" {
		t.Fatalf("message %q", got)
	}
}
