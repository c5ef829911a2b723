package record

import (
	"errors"
	"fmt"
)

var (
	// ErrConflict reports a lost revision compare-and-swap: the key is not at
	// the revision the write (or conditional delete) expected. Nothing was
	// written. Re-read (a leader read when it matters) and decide again.
	ErrConflict = errors.New("record: revision conflict")
	// ErrNotFound reports a key that is missing or deleted (a delete, purge
	// or TTL-expiry marker), or a revision the stream leader does not hold.
	ErrNotFound = errors.New("record: not found")
	// ErrExists reports a create-only write over a live key. It always comes
	// as an *OwnedError, which also matches ErrConflict.
	ErrExists = errors.New("record: already exists")
	// ErrInvalid reports a record or argument refused before anything was
	// written (a bad session or deployment ID, a zero revision for a
	// conditional write, a TTL below one second...). It wraps the subjects
	// error where there is one.
	ErrInvalid = errors.New("record: invalid argument")
	// ErrTooLarge reports a value larger than the bucket's maximum value size
	// (headers included). Nothing was written.
	ErrTooLarge = errors.New("record: value too large")
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
	msg := "record: " + e.Key + " is taken"
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

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
