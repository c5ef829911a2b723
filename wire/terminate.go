package wire

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// A user's end of a session. It crosses three durable boundaries: the
// inbox (version 4, kind terminate), the events (session.ended data
// version 4: reason terminated, by, message) and the checkpoint (state
// version 8: ended terminated).

// KindTerminate (inbox version 4) is a user's end of a session: the owner
// applies it at once, at its next boundary (it never waits in a turn, and
// a checkpoint never stores it), cancels the running step, the waits, the
// tasks and the children, and ends the session with session.ended
// {reason: terminated, by: user, message}. Its body is optional. It is
// always a user's, never sent by a session's runtime to another: it
// carries no parentSessionId, handle or depth.
const KindTerminate Kind = "terminate"

// TerminateVersion is the inbox version that added KindTerminate: a
// deployment whose owners advertise it reads a terminate command; one that
// does not is refused it (ErrUnsupportedTarget), never sent a downgraded
// one.
const TerminateVersion = 4

// MaxEndMessageBytes bounds the message of a user's end (a terminate
// command's, and session.ended's): valid UTF-8 of at most this many bytes
// (the schemas state as many characters; the Go rules, the stricter,
// count bytes).
const MaxEndMessageBytes = 256

// Terminate is the body of a terminate command (optional: a terminate
// without a message carries none). Message, when present, is not empty:
// a body without one is no body (Decode and Encode drop it).
type Terminate struct {
	Message string `json:"message,omitempty" jsonschema:"minLength=1,maxLength=256"`
}

// Validate checks a terminate command's body by the rules Encode applies
// to it: the message valid UTF-8 of at most MaxEndMessageBytes bytes ("" is
// no message). The error wraps ErrInvalid.
func (t *Terminate) Validate() error {
	if err := t.validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}

func (t *Terminate) validate() error { return checkEndMessage(t.Message) }

// checkEndMessage is the rule of an end's message ("" is none): valid
// UTF-8 of at most MaxEndMessageBytes bytes.
func checkEndMessage(m string) error {
	switch {
	case len(m) > MaxEndMessageBytes:
		return fmt.Errorf("message is %d bytes, limit %d", len(m), MaxEndMessageBytes)
	case !utf8.ValidString(m):
		return errors.New("message is not valid UTF-8")
	}
	return nil
}

// normalizeTerminate gives a command's terminate body its one in-memory
// form: a copy, and none on a terminate command whose body has no message
// (on another kind an empty body is kept, for the rules to refuse).
func normalizeTerminate(c *Command) {
	switch t := c.Terminate; {
	case t == nil:
	case t.Message == "" && c.Kind == KindTerminate:
		c.Terminate = nil
	default:
		n := *t
		c.Terminate = &n
	}
}

// validateTerminate refuses the envelope's parent members on a terminate
// command: it is a user's, never a session runtime's.
func (c *Command) validateTerminate() error {
	if c.Kind == KindTerminate && (c.ParentSessionID != "" || c.Handle != "" || c.Depth != 0) {
		return errors.New("a terminate command is a user's, never a session's: no parentSessionId, handle or depth")
	}
	return nil
}
