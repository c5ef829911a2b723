package handoff

import "errors"

var (
	// ErrInvalid reports a request refused before anything was written: an
	// empty handoff ID, a target that is empty, `latest` or not a deployment
	// ID, a target equal to the source, a record the source does not hold.
	ErrInvalid = errors.New("handoff: invalid request")
	// ErrRefused reports a candidate that did not activate and never will
	// for this request: the record is not staged for this handoff at the
	// expected revision, the marker does not match, the target is not this
	// deployment, or the checkpoint is unreadable. It is a failure before
	// activation: the source reclaims. The reason is wrapped beside it.
	ErrRefused = errors.New("handoff: refused")
	// ErrStale is the refusal of a candidate whose expected revision is no
	// longer the record's: the source reclaimed (so this candidate is
	// fenced) or another owner holds the session.
	ErrStale = errors.New("handoff: record moved past the expected revision")
	// ErrWrongTarget is the refusal of a request addressed to another
	// deployment than the candidate's, or to one the marker does not name.
	ErrWrongTarget = errors.New("handoff: not the target deployment")
	// ErrNotStaged is the refusal of a request whose record or marker does
	// not show this handoff staged.
	ErrNotStaged = errors.New("handoff: session not staged for this handoff")
	// ErrUnreadable is the refusal of a checkpoint the candidate cannot
	// validate or hydrate.
	ErrUnreadable = errors.New("handoff: checkpoint unreadable")
	// ErrUncertain reports an activation whose claim CAS may have landed
	// (its reply was lost and no leader read settled it). The candidate must
	// not run the session; see docs/handoff.md for how it is recovered.
	ErrUncertain = errors.New("handoff: activation outcome uncertain")
	// ErrNoResponders reports a start request nobody received: a failure
	// before activation.
	ErrNoResponders = errors.New("handoff: no responders for the start request")
	// ErrUnresolved reports a transaction that could not learn who holds
	// the record (the store stayed unreachable, or an injected crash). The
	// source must stop the session without writing; see docs/handoff.md.
	ErrUnresolved = errors.New("handoff: outcome unresolved")
	// ErrReplyLost is returned by an after failpoint's action (tests) to make
	// the write just performed look as if its reply was lost: the landed
	// write is then settled the way a real lost reply is.
	ErrReplyLost = errors.New("handoff: reply lost (injected)")
)
