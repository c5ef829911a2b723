package pool

import (
	"errors"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime/session"
)

var (
	// ErrEventGap means an event would leave a hole in a session's seq (the
	// kv.Appender's refusal).
	ErrEventGap = kv.ErrEventGap
	// ErrUnbootable reports a session whose checkpoint cannot be read by
	// this build, on any attempt: it does not decode (an unsupported state
	// version, an invalid shape), or its out-of-line content (a history
	// segment, the state, an input's text) is gone or corrupt. Each such
	// attempt is counted in the record (docs/driver.md, "Quarantine"); a
	// store that merely did not answer is not.
	ErrUnbootable = session.ErrUnbootable
	// ErrQuarantined reports a session that is quarantined (by this
	// attempt or before): no owner runs it until an operator retries or
	// ends it.
	ErrQuarantined = errors.New("pool: session quarantined")
	// ErrDeferred reports a boot attempt not made yet: the session's last
	// attempts failed and the quarantine backoff has not passed. The
	// process that deferred it tries again when it has.
	ErrDeferred = errors.New("pool: boot attempt deferred (quarantine backoff)")
	// ErrFenced reports that this owner process does not hold a valid
	// lease: it could not renew it in time, or another process took it
	// over. A fenced process runs no step, commits nothing and serves no
	// request until it has acquired its lease again.
	ErrFenced = session.ErrFenced
	// ErrAtCapacity reports that this owner process holds its maximum of
	// loaded sessions and none could hibernate in time.
	ErrAtCapacity = errors.New("pool: owner process at its loaded-session capacity")
	// errTerminated: an operator ended the session while it was
	// quarantined; nothing is left to run (the wake outcome "ended").
	errTerminated = errors.New("pool: session ended by an operator")
	// errEndPending: an end of the session was requested while no owner of
	// its deployment ran (record.FinishPending): no owner runs it, the
	// finisher ends it (the wake outcome "ended").
	errEndPending = errors.New("pool: session's end pending")
	// errClaiming: another claim of the session is in progress in this
	// process; it may still be deferred or fail, so the session does not
	// run here yet (the wake outcome "deferred", never "running").
	errClaiming = errors.New("pool: a claim of the session is in progress here")
)
