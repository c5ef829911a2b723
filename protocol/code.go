package protocol

// Code is the stable code of a [ReplyError]. An unknown code is read as
// CodeUnavailable (retry), except by a handoff source, which reads any code
// but CodeUncertain as a definite refusal.
type Code string

// Reply error codes.
const (
	// CodeBadRequest (every reply): the body did not decode or breaks a
	// rule; repeating it gets the same answer.
	CodeBadRequest Code = "bad_request"
	// CodeUnavailable (every reply): the owner could not serve it now
	// (fenced, the store failed); the sender may retry. In a handoff start
	// reply it is definite: the candidate did not activate.
	CodeUnavailable Code = "unavailable"
	// CodeConflict (wake, finish): the claim lost its CAS on every try, or
	// another finisher's claim won; retry.
	CodeConflict Code = "conflict"
	// CodeAtCapacity (wake): the owner holds its maximum of loaded sessions
	// and none could hibernate in time; retry.
	CodeAtCapacity Code = "at_capacity"
	// CodeWaitsPending (wake): a session of a retired deployment has a live
	// wait, so only an operator's forced move takes it across.
	CodeWaitsPending Code = "waits_pending"
	// CodeRefused (handoff start): not staged, stale, the wrong target or an
	// unreadable checkpoint; the candidate did not activate and will not for
	// this request. (finish): no finish is pending in the session's record
	// (none was asked, or another owner carried it out).
	CodeRefused Code = "refused"
	// CodeUncertain (handoff start): the claim may have landed; the only
	// code of a handoff start reply that is not definite.
	CodeUncertain Code = "uncertain"
)
