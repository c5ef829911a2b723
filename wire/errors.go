package wire

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrUnknownVersion is returned for a payload that declares a version this
	// build does not know (typically a newer one). It is never reinterpreted.
	ErrUnknownVersion = errors.New("wire: unknown version")
	// ErrUnknownKind is returned for a command or event kind this build (or the
	// given event registry) does not know.
	ErrUnknownKind = errors.New("wire: unknown kind")
	// ErrInvalid is returned for a value that does not satisfy its declared
	// shape: malformed JSON, unknown fields, missing or ill-typed fields, or a
	// violated rule.
	ErrInvalid = errors.New("wire: invalid value")
	// ErrTooLarge is returned when a value exceeds its size limit (see the
	// Max* constants).
	ErrTooLarge = errors.New("wire: too large")
	// ErrUnsupportedTarget is returned by Encode for a target capability this
	// build cannot produce (version 0, or a version newer than it knows).
	ErrUnsupportedTarget = errors.New("wire: unsupported target version")
	// ErrUnsupportedState is returned when a checkpoint declares a state
	// version this build cannot read; a successor refuses it before it
	// activates.
	ErrUnsupportedState = errors.New("wire: unsupported checkpoint state version")
	// ErrRegistry is returned for an illegal registration: a version that is
	// not the next one, or an event kind registered twice or badly named.
	ErrRegistry = errors.New("wire: bad registration")
	// ErrDigestMismatch is returned when a blob does not match its reference.
	ErrDigestMismatch = errors.New("wire: digest mismatch")
)

// Error is the typed error of the command codec. Version is the wire version
// the payload declared (0 for the unversioned era), Kind and CommandID are
// filled when they were readable. Err is one of the sentinels above, so
// errors.Is(err, wire.ErrUnknownVersion) works.
type Error struct {
	Version   int
	Kind      string
	CommandID string
	Reason    string
	Err       error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	fmt.Fprintf(&b, " (v=%d", e.Version)
	if e.Kind != "" {
		fmt.Fprintf(&b, " kind=%q", e.Kind)
	}
	if e.CommandID != "" {
		fmt.Fprintf(&b, " id=%q", e.CommandID)
	}
	b.WriteString(")")
	if e.Reason != "" {
		b.WriteString(": " + e.Reason)
	}
	return b.String()
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// EventError is the typed error of the event codec. SessionID, Seq and Kind
// are filled when they were readable.
type EventError struct {
	SessionID string
	Seq       uint64
	Kind      string
	V         int
	Reason    string
	Err       error
}

func (e *EventError) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	fmt.Fprintf(&b, " (event session=%q seq=%d kind=%q v=%d)", e.SessionID, e.Seq, e.Kind, e.V)
	if e.Reason != "" {
		b.WriteString(": " + e.Reason)
	}
	return b.String()
}

// Unwrap returns the sentinel.
func (e *EventError) Unwrap() error { return e.Err }

// StateError is the typed error of the checkpoint codec. StateV is the state
// version the checkpoint declared (0 if unreadable).
type StateError struct {
	StateV int
	Reason string
	Err    error
}

func (e *StateError) Error() string {
	s := fmt.Sprintf("%s (checkpoint stateV=%d)", e.Err.Error(), e.StateV)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap returns the sentinel.
func (e *StateError) Unwrap() error { return e.Err }

// reject builds a command error with a formatted reason.
func reject(sentinel error, format string, args ...any) *Error {
	return &Error{Err: sentinel, Reason: fmt.Sprintf(format, args...)}
}

// asError converts any error into a command *Error, keeping a typed one.
func asError(err error) *Error {
	var we *Error
	if errors.As(err, &we) {
		return we
	}
	return &Error{Err: ErrInvalid, Reason: err.Error()}
}
