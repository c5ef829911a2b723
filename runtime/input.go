package runtime

import "time"

// Input is one input to [Machine.Handle].
type Input interface{ input() }

// BootReason says why an owner run starts.
type BootReason string

// Boot reasons.
const (
	BootNew     BootReason = "new"     // a new session: arm the timer
	BootHandoff BootReason = "handoff" // a handoff successor: re-arm the timer
	BootRecover BootReason = "recover" // crash recovery or wake: re-publish it
	BootAdopt   BootReason = "adopt"   // adopted from a retired deployment: re-arm the timer
)

// Boot is the first input of every machine, after the driver's claim CAS.
type Boot struct {
	Now    time.Time
	Reason BootReason
	// Handoff describes the handoff that activated this owner (optional,
	// only with BootHandoff). The boot commit then records handoff.started
	// and handoff.completed.
	Handoff *HandoffInfo
	// Commit makes the boot commit even when nothing changed: a run's
	// first commit is the settled point that clears the mark its claim
	// left in the session record (docs/driver.md, "Quarantine"), so a
	// session that boots idle is not taken for one that died loading.
	Commit bool
	// Adopt describes the adoption of a session of a retired deployment
	// with no live owner (only with BootAdopt): the boot commit records
	// handoff.completed, cancels every wait when forced (wait.cancelled),
	// and records the dead owner's uncommitted step as step.interrupted.
	Adopt *AdoptInfo
	// First is a command the driver read before booting (a handoff
	// successor's trigger, which its cursor delivers first): it is
	// received as by Received after the boot's own changes, so the boot's
	// commit also admits it — one commit, and one append of events, where
	// a boot and then the command took two. A command the machine would
	// hand off ([Machine.HandsOff]) or one without seq and ID is refused
	// (ErrInvalidCommand) before the boot changes anything; the driver
	// sends it as Received after the boot instead.
	First *Received
}

// AdoptInfo identifies an adoption (a target-driven handoff from a retired
// deployment whose owner is gone).
type AdoptInfo struct {
	ID    string // the adoption's ID (handoffId of handoff.completed)
	From  string // the retired deployment
	Epoch uint64 // the adopter's fencing epoch
	Force bool   // the operator forced it: cancel the session's waits
}

// HandoffInfo identifies a completed handoff for its successor's boot.
type HandoffInfo struct {
	ID      string // the handoff ID
	From    string // the predecessor's deployment
	Trigger Ref    // the trigger command (ID and sequence)
	Epoch   uint64 // the successor's fencing epoch
}

// Received is a command read from the inbox.
type Received struct {
	Cmd Command
	// Now is when the driver received it (zero: the machine's clock stays
	// where the last input left it); a debounce window counts from it.
	Now time.Time
}

// StepDone reports the end of the step named by [RunStep].
type StepDone struct {
	TurnID string
	Step   int
	Result StepResult
	// Calls are the names of the journaled calls the step made, in order
	// (a rollback reports them in turn.rolled_back).
	Calls []string
}

// CommitOutcome is the outcome of a [Commit].
type CommitOutcome int

// Commit outcomes.
const (
	CommitOK        CommitOutcome = iota // the CAS landed
	CommitConflict                       // ownership lost: the machine stops
	CommitUncertain                      // reply lost: the driver must resolve
)

// CommitDone reports the outcome of the commit in flight.
type CommitDone struct{ Outcome CommitOutcome }

// HandoffDone reports the outcome of a [Handoff]. Moved means the successor
// activated: the machine stops. Otherwise the owner keeps the session and
// processes the trigger; a non-empty SkipReason (for example "queued" when
// the transaction saw a backlog) is recorded as handoff.skipped. A non-empty
// Failure ("step: reason") records handoff.started and handoff.failed in the
// next commit, before the trigger's command.applied.
type HandoffDone struct {
	Moved      bool
	SkipReason string
	HandoffID  string // the transaction's handoff ID
	Failure    string // why the transaction failed, prefixed with its step
}

// SendsDone tells the machine that the last commit's sends left (the
// driver performed its SendCommands): with nothing in flight, it commits
// the checkpoint without them, so a later boot does not send them again.
// The driver feeds it before it hibernates a session whose last commit
// sent something.
type SendsDone struct{}

// SendsPending tells the machine that these sends of the last commit
// could not leave: each creates a child on a deployment with no live
// owner. The machine keeps each whose handle still waits for it in the
// checkpoint's pendingSends (its timeout measured from the delegation's
// acceptance), and the driver retries it outside the session loop until
// it leaves ([SendsLeft]) or its timeout passes (then the driver sends
// the session a failed child.result with child_unavailable).
type SendsPending struct{ Sends []Send }

// SendsLeft tells the machine that the pending sends with these command
// IDs left (the child was created and the delegation stored): they are
// dropped from the checkpoint.
type SendsLeft struct{ IDs []string }

// Tick advances the machine's clock. Time only ever enters through inputs.
type Tick struct{ Now time.Time }

// IdleExpire asks the machine to end the session with reason idle_expired:
// the driver found it had no command for its owner's idle limit
// (--end-idle-after). The machine ends it only while it is idle
// (IdleReason ""): no turn, step, commit or handoff, no queued command,
// not paused, and no wait for input, authorization, a task or a child.
// Otherwise it does nothing: a session that waits never expires this way.
type IdleExpire struct{}

// Forgotten reports the applied commands of a [Forget] the driver deleted
// from the inbox (Seqs), or could not delete (Kept: asked for again at a
// later commit).
type Forgotten struct{ Seqs, Kept []uint64 }

func (Boot) input()         {}
func (Received) input()     {}
func (StepDone) input()     {}
func (CommitDone) input()   {}
func (HandoffDone) input()  {}
func (Tick) input()         {}
func (SendsDone) input()    {}
func (SendsPending) input() {}
func (SendsLeft) input()    {}
func (Forgotten) input()    {}
func (IdleExpire) input()   {}
