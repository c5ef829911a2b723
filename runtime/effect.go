package runtime

// Effect is one instruction to the driver. The driver performs the effects
// of one [Machine.Handle] call in order.
type Effect interface{ effect() }

// Commit asks for one CAS of the session record carrying Snapshot (with the
// new events in Snapshot.Outbox). Applied lists the commands it applies.
// The driver answers with [CommitDone].
type Commit struct {
	Snapshot Snapshot
	Applied  []Ref
}

// Publish appends committed events to the public stream. It is idempotent
// (message ID <sessionID>/<seq>) and must complete before the driver
// performs the next [Commit].
type Publish struct{ Events []Event }

// RunStep asks the driver to run one agent step. The driver answers with
// [StepDone]. Retry is set when the step runs again after a failure its
// [RetryPolicy] retries: the driver waits Retry.After first (a
// [CancelStep] ends the wait), and the step replays its journal.
type RunStep struct {
	Input StepInput
	Retry *StepRetry
}

// CancelStep asks the driver to cancel the running step's context now. The
// durable effect of the interrupt follows at the next boundary.
type CancelStep struct {
	TurnID string
	Step   int
	Reason Kind
}

// Handoff asks the driver to try the handoff transaction for Trigger to
// deployment Target. The driver answers with [HandoffDone].
type Handoff struct {
	Trigger Command
	Target  string
}

// ArmTimer asks the driver to publish (or re-publish) the committed timer's
// schedule.
type ArmTimer struct {
	Timer Timer
	// Debounce arms the debounce window's timer, on its own schedule
	// subject, instead of the session-lifetime timer.
	Debounce bool
}

// StartTask asks the driver to start a committed background task.
type StartTask struct{ Task TaskSpec }

// ClaimAlias asks the driver to claim a committed alias: create its hook and
// recreate the consumer at the lowest unapplied sequence.
type ClaimAlias struct{ Token string }

// SendCommands asks the driver to send committed commands to other
// sessions' stable inboxes (a parent's delegation, cancel and end to its
// children; a child's result and waits to its parent), each encoded for
// the receiving session's inbox version, its message ID its command ID,
// creating a child first where the send names an alias, and waking the
// receiver. The machine repeats the last commit's sends at boot.
type SendCommands struct{ Sends []Send }

// Purge allows the driver to purge this session's processed commands below
// sequence Below.
type Purge struct{ Below uint64 }

// Forget asks the driver to delete these applied commands from the inbox:
// the applied set holds them above the lowest unapplied sequence (a FIFO
// command waits below them) and has grown past its bound. Each is durably
// applied; once deleted no cursor can deliver it again, so the driver
// answers with [Forgotten] and the next commit drops them from the set. A
// command already gone counts as deleted.
type Forget struct{ Seqs []uint64 }

// ResolveCommit asks the driver to settle an uncertain commit by a leader
// read: the record holds Writer → CommitDone{CommitOK}, else
// CommitDone{CommitConflict}.
type ResolveCommit struct{ Writer Writer }

// Cleanup is the idempotent clean-up after finalization: tombstone the
// addresses, delete the consumer, purge the timer.
type Cleanup struct {
	Reason  string
	Aliases []string
}

func (Commit) effect()        {}
func (Publish) effect()       {}
func (RunStep) effect()       {}
func (CancelStep) effect()    {}
func (Handoff) effect()       {}
func (ArmTimer) effect()      {}
func (StartTask) effect()     {}
func (ClaimAlias) effect()    {}
func (Purge) effect()         {}
func (Forget) effect()        {}
func (SendCommands) effect()  {}
func (ResolveCommit) effect() {}
func (Cleanup) effect()       {}
