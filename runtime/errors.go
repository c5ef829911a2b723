package runtime

import "errors"

var (
	// ErrNotBooted is returned for any input before [Boot].
	ErrNotBooted = errors.New("runtime: machine not booted")
	// ErrBooted is returned for a second [Boot].
	ErrBooted = errors.New("runtime: machine already booted")
	// ErrStopped is returned for any input after the machine stopped: a
	// commit conflicted (ownership lost) or a handoff moved the session.
	ErrStopped = errors.New("runtime: machine stopped")
	// ErrEnded is returned for a command received after finalization.
	ErrEnded = errors.New("runtime: session ended")
	// ErrNoStep is returned for a [StepDone] that does not match the running
	// step.
	ErrNoStep = errors.New("runtime: no such step running")
	// ErrNoCommit is returned for a [CommitDone] with no commit in flight.
	ErrNoCommit = errors.New("runtime: no commit in flight")
	// ErrNoHandoff is returned for a [HandoffDone] with no handoff pending.
	ErrNoHandoff = errors.New("runtime: no handoff pending")
	// ErrInvalidCommand is returned for a received command without a
	// sequence or an ID.
	ErrInvalidCommand = errors.New("runtime: invalid command")
	// ErrUnknownInput is returned for an input type the machine does not
	// know.
	ErrUnknownInput = errors.New("runtime: unknown input")
)

var (
	// ErrConfig is returned by [NewMachine] for an incomplete [Config].
	ErrConfig = errors.New("runtime: invalid config")
	// ErrEventKind fails a step that emits a reserved or unregistered event
	// kind.
	ErrEventKind = errors.New("runtime: unregistered event kind")
	// ErrOutcome fails a step that returns an unknown outcome.
	ErrOutcome = errors.New("runtime: unknown step outcome")
)
