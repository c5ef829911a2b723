package session

import "errors"

var (
	// ErrFenced reports that the owner process does not hold a valid lease:
	// a session stops without another effect.
	ErrFenced = errors.New("session: owner process fenced (lease lost or not renewed in time)")
	// ErrUnbootable reports a session whose checkpoint cannot be read by
	// this build and never will be: it does not decode, its state version
	// is unknown, or out-of-line content it references is missing or does
	// not match its digest. Each such attempt counts towards quarantine.
	ErrUnbootable = errors.New("session: checkpoint unreadable")
	// ErrBlobNotFound is a Blobs Get of a name not stored.
	ErrBlobNotFound = errors.New("session: blob not found")
	// ErrHandoffDisabled is Host.Handoff in a process that does not hand
	// off: the session keeps its delivery and processes it.
	ErrHandoffDisabled = errors.New("session: handoff disabled")
	// errReplyLost is the injected fault "the CAS landed but its reply was
	// lost".
	errReplyLost = errors.New("session: commit reply lost (injected)")
)
