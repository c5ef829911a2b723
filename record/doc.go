// Package record defines the session record — ownership, the lifecycle
// state, the last handoff's outcome and the opaque checkpoint — together
// with the hook and handoff-marker records, the ownership value, and every
// pure transition between record states: claim, stage, reclaim, activate,
// release, hibernate, adopt, confirm and end, and the quarantine's: fail (a
// boot that failed before its claim), refuse (a run whose own commit was
// refused), quarantine, retry and terminate, an operator's finish request
// and the finisher's claim (finish.go), with the boot-attempt rule
// (Attempt, and the mark every claim leaves until its run's first commit,
// Unsettled). It also holds the sentinels
// the ownership protocol speaks (ErrConflict, ErrNotFound, ErrExists,
// ErrInvalid, ErrTooLarge and *OwnedError).
//
// record imports only subjects and wire (the idle rule's skip reasons). The kv
// package stores these
// records in JetStream KV under revision compare-and-swap and maps
// jetstream's errors onto the sentinels (wrapping both, so errors.Is matches
// either); the handoff transaction, the owner's driver and the ingress's
// admin routes (an operator's finish request, release) change records only
// through the transitions here, so the
// rules for who may write what live in one place. Every transition is a
// function from a record to a record (or a typed refusal): nothing here
// does I/O.
package record
