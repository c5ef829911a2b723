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
	// ErrCommitRefused reports a run stopped because its own commit was
	// refused (too large, invalid): it recorded the refusal as a boot
	// attempt (record.Refused) and let the session go.
	ErrCommitRefused = errors.New("session: commit refused")
	// ErrBlobNotFound is a Blobs Get of a name not stored.
	ErrBlobNotFound = errors.New("session: blob not found")
	// ErrHandoffDisabled is Handoffs.Handoff in a process that does not hand
	// off: the session keeps its delivery and processes it.
	ErrHandoffDisabled = errors.New("session: handoff disabled")
	// ErrSendExpired is Sends.SendPending's answer for a child send whose
	// deadline passed (or whose deployment is retired): its failure was
	// published to the sending session's inbox.
	ErrSendExpired = errors.New("session: child send expired")
	// errReplyLost is the injected fault "the CAS landed but its reply was
	// lost".
	errReplyLost = errors.New("session: commit reply lost (injected)")
	// errCommitDropped is the injected fault "the commit CAS was never
	// answered": it did not land.
	errCommitDropped = errors.New("session: commit dropped (injected)")
)
