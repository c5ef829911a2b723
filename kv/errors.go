package kv

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

var (
	// ErrConflict reports a lost revision compare-and-swap: the key is not at
	// the revision the write (or conditional delete) expected. Nothing was
	// written. Re-read (a leader read when it matters) and decide again.
	ErrConflict = errors.New("kv: revision conflict")
	// ErrNotFound reports a key that is missing or deleted (a delete, purge
	// or TTL-expiry marker), or a revision the stream leader does not hold.
	ErrNotFound = errors.New("kv: not found")
	// ErrExists reports a create-only write over a live key. It always comes
	// as an *OwnedError, which also matches ErrConflict.
	ErrExists = errors.New("kv: already exists")
	// ErrInvalid reports a record or argument refused before anything was
	// written (a bad session or deployment ID, a zero revision for a
	// conditional write, a TTL below one second...). It wraps the subjects
	// error where there is one.
	ErrInvalid = errors.New("kv: invalid argument")
	// ErrTooLarge reports a value larger than the bucket's maximum value size
	// (headers included). Nothing was written.
	ErrTooLarge = errors.New("kv: value too large")
)

// OwnedError reports a create-only write (a session claim, an alias, a
// handoff marker, a lease acquisition or takeover, a deployment record) that
// found the key taken. errors.Is(err, ErrExists) and errors.Is(err,
// ErrConflict) are both true.
//
// The holder's fields come from a leader read made right after the lost
// write; they are empty when the holder could not be read (the key changed
// again meanwhile), and Revision is then 0.
type OwnedError struct {
	Key       string // the contested key
	SessionID string // session that holds the key (session records, hooks, markers)
	Owner     string // owner run of a session record, handoff ID of a marker, holder process of a lease
	Revision  uint64 // revision of the holder's value
	Ended     bool   // the key holds a tombstone or the record of an ended session
}

func (e *OwnedError) Error() string {
	msg := "kv: " + e.Key + " is taken"
	if e.SessionID != "" {
		msg += " by session " + e.SessionID
	}
	if e.Owner != "" {
		msg += " (owner " + e.Owner + ")"
	}
	if e.Ended {
		msg += " (ended)"
	}
	if e.Revision != 0 {
		msg += fmt.Sprintf(" at revision %d", e.Revision)
	}
	return msg
}

// Unwrap makes errors.Is match both ErrExists and ErrConflict.
func (e *OwnedError) Unwrap() []error { return []error{ErrExists, ErrConflict} }

// mapErr translates an error of a jetstream KV method. Only errors.Is is
// used: nats.go maps both wrong-last-sequence codes (10071 on a single
// server, 10164 for a replicated stream) to ErrKeyRevisionMismatch for
// Update and Delete/Purge, so a lost CAS on R3 maps exactly as on R1.
func mapErr(op, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyExists):
		return fmt.Errorf("%w: %s %s: %w", ErrConflict, op, key, err)
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return fmt.Errorf("%w: %s %s: %w", ErrNotFound, op, key, err)
	case errors.Is(err, jetstream.ErrInvalidKey):
		return fmt.Errorf("%w: %s %s: %w", ErrInvalid, op, key, err)
	}
	return fmt.Errorf("kv: %s %s: %w", op, key, err)
}

// mapPublishErr translates the error of a raw CAS publish to $KV.<bucket>.<key>
// (the lease writes, which must carry a per-message TTL that kv.Update cannot
// set). That path is not a KV method, so nats.go does not wrap its answer in
// ErrKeyRevisionMismatch, and jetstream.ErrKeyExists only matches 10071:
// this is the one place a raw error code is read. 10071 ("wrong last
// sequence: N") is what a single server answers; a replicated stream also
// answers 10164 ("wrong last sequence", another proposal for the subject is
// in flight). Both mean the CAS lost.
func mapPublishErr(op, key string, err error) error {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			return fmt.Errorf("%w: %s %s: %w", ErrConflict, op, key, err)
		case jetstream.JSErrCodeStreamMessageExceedsMaximum:
			return fmt.Errorf("%w: %s %s: %w", ErrTooLarge, op, key, err)
		}
	}
	return mapErr(op, key, err)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
