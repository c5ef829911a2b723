package record

import (
	"errors"
	"fmt"
	"time"

	"github.com/baton-rt/baton/subjects"
)

// Ownership is who runs a session: the identity part of its record. Epoch is
// the fencing token, +1 on every ownership change.
type Ownership struct {
	SessionID    string
	OwnerRunID   string
	DeploymentID string
	Epoch        uint64
	Process      string
}

// Ownership returns the record's ownership.
func (r SessionRecord) Ownership() Ownership {
	return Ownership{SessionID: r.SessionID, OwnerRunID: r.OwnerRunID, DeploymentID: r.DeploymentID, Epoch: r.Epoch, Process: r.OwnerProcess}
}

// Owner is an owner run taking a session: its run, exact deployment, owner
// process and the inbox wire version it reads (0 keeps the record's).
type Owner struct {
	RunID      string
	Deployment string
	Process    string
	WireV      int
}

func (o Owner) validate() error {
	if o.RunID == "" || o.Process == "" {
		return invalid("owner needs a run and a process")
	}
	return subjects.ValidateDeployment(o.Deployment)
}

// Handoff outcomes (HandoffOutcome.Outcome) and the steps transitions write.
const (
	OutcomeStaged    = "staged"    // written by Stage; the transfer is in progress
	OutcomeCompleted = "completed" // written by the candidate's Activate
	OutcomeAbandoned = "abandoned" // reclaimed because a backlog was found
	OutcomeFailed    = "failed"    // reclaimed after a failure before activation

	StepActivate  = "activate"  // the outcome's step after Activate
	StepRecover   = "recover"   // Adopt: the staged source died
	StepConfirmed = "confirmed" // Confirm: the successor committed the handoff's events
)

// ErrTransition is matched by every refused transition (*TransitionError).
var ErrTransition = errors.New("record: transition refused")

// TransitionError is a refused transition: the record is not in a state the
// transition may start from, or is held by another run. Nothing changes.
type TransitionError struct {
	Transition string // claim, stage, reclaim, activate, release, hibernate, commit, fail, refuse, quarantine, retry, terminate
	SessionID  string
	From       State  // the record's state
	Epoch      uint64 // the record's epoch
	Reason     string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("record: %s of session %s refused in state %s at epoch %d: %s", e.Transition, e.SessionID, e.From, e.Epoch, e.Reason)
}

// Unwrap makes errors.Is match ErrTransition.
func (e *TransitionError) Unwrap() error { return ErrTransition }

func refuse(t string, r SessionRecord, format string, args ...any) error {
	return &TransitionError{Transition: t, SessionID: r.SessionID, From: r.State, Epoch: r.Epoch, Reason: fmt.Sprintf(format, args...)}
}

// New is the record of a session created by owner o: epoch 1, active, the
// first inbox consumer, the initial checkpoint.
func New(sessionID string, o Owner, checkpoint []byte) (SessionRecord, error) {
	if err := o.validate(); err != nil {
		return SessionRecord{}, err
	}
	r := SessionRecord{SessionID: sessionID, State: StateActive, Checkpoint: checkpoint}
	r = own(r, o, 1)
	return r, r.Validate()
}

// own sets r's ownership to o at epoch: a new run writes from counter 0,
// reading a new inbox consumer.
func own(r SessionRecord, o Owner, epoch uint64) SessionRecord {
	r.Epoch = epoch
	r.OwnerRunID, r.DeploymentID, r.OwnerProcess = o.RunID, o.Deployment, o.Process
	r.Consumer = subjects.Consumer(r.SessionID, epoch)
	r.Writer, r.WriteCounter = o.RunID, 0
	if o.WireV > 0 {
		r.WireV = o.WireV
	}
	r.UpdatedAt = time.Time{}
	return r
}

// Claim is the claim of crash recovery, a wake, a takeover or an adoption:
// owner o takes the session at epoch+1. A record staged for a handoff whose
// source died is adopted first (see Adopt). A hibernated or adopted record
// becomes settled (active or paused, as its checkpoint says, b.Settled); an
// ended record stays ended (the claimer repeats its idempotent clean-up).
// The claim counts a boot attempt when the run the record names may have
// died of the session (Attempt), in the same write, and leaves its own
// mark (Unsettled) until its run's first commit; it uses up an operator's
// retry target. A
// quarantined record is never claimed, nor one retried on another
// deployment than o's.
func Claim(r SessionRecord, o Owner, b Boot) (SessionRecord, error) {
	if err := o.validate(); err != nil {
		return SessionRecord{}, err
	}
	switch {
	case b.Settled != StateActive && b.Settled != StatePaused:
		return SessionRecord{}, refuse("claim", r, "a claimed session is active or paused, not %s", b.Settled)
	case r.State == StateQuarantined:
		return SessionRecord{}, refuse("claim", r, "quarantined: an operator retries or ends it")
	case r.IsDeleted():
		return SessionRecord{}, refuse("claim", r, "deleted")
	case r.FinishPending():
		return SessionRecord{}, refuse("claim", r, "an end is pending: an owner finishes it (ClaimFinish), none runs it")
	case r.Retry != nil && r.Retry.DeploymentID != o.Deployment:
		return SessionRecord{}, refuse("claim", r, "retried on deployment %s, not %s", r.Retry.DeploymentID, o.Deployment)
	}
	if n := Attempt(r, b); n > r.BootAttempts {
		r.BootAttempts, r.LastBootError, r.BootAttemptAt = n, "", b.At
	}
	r = Adopt(r)
	if r.State == StateHibernated || r.State == StateHandoff {
		r.State = b.Settled
	}
	r.Retry = nil
	return own(r, o, r.Epoch+1), nil
}

// Stage marks the session mid-handoff to target for handoff id (step 1 of
// the transaction). Only the owner run (at its epoch) stages, from active.
// Writer and WriteCounter stay: they identify the source's last commit, and
// a handoff write must never look like a later commit.
func Stage(r SessionRecord, by Ownership, id, target string) (SessionRecord, error) {
	if err := held("stage", r, by); err != nil {
		return SessionRecord{}, err
	}
	if r.State != StateActive {
		return SessionRecord{}, refuse("stage", r, "only an active session hands off")
	}
	return withHandoff(r, StateHandoff, HandoffOutcome{ID: id, Target: target, Outcome: OutcomeStaged, Step: "stage"}), nil
}

// Reclaim takes a staged record back to active for the source (a backlog
// found, or a failure before activation), recording outcome at step.
func Reclaim(r SessionRecord, by Ownership, id, outcome, step string) (SessionRecord, error) {
	if err := held("reclaim", r, by); err != nil {
		return SessionRecord{}, err
	}
	if r.State != StateHandoff || r.Handoff == nil || r.Handoff.ID != id {
		return SessionRecord{}, refuse("reclaim", r, "not staged for handoff %s", id)
	}
	return withHandoff(r, StateActive, HandoffOutcome{ID: id, Target: r.Handoff.Target, Outcome: outcome, Step: step}), nil
}

// Activate is the handoff: the candidate o of the record's target claims
// the record staged for handoff m (epoch+1), recording the outcome with
// the source deployment and trigger, so an owner recovering a successor that
// died before its first commit still records the handoff's events.
func Activate(r SessionRecord, o Owner, m Marker) (SessionRecord, error) {
	if err := o.validate(); err != nil {
		return SessionRecord{}, err
	}
	switch {
	case r.State != StateHandoff || r.Handoff == nil || r.Handoff.ID != m.HandoffID:
		return SessionRecord{}, refuse("activate", r, "not staged for handoff %s", m.HandoffID)
	case r.Handoff.Target != o.Deployment:
		return SessionRecord{}, refuse("activate", r, "staged for deployment %s, not %s", r.Handoff.Target, o.Deployment)
	}
	from := r.DeploymentID
	r = own(r, o, r.Epoch+1)
	r.State = StateActive
	r.Handoff = &HandoffOutcome{ID: m.HandoffID, Target: o.Deployment, Outcome: OutcomeCompleted, Step: StepActivate,
		From: from, TriggerSeq: m.TriggerSeq, TriggerCommandID: m.TriggerCommandID}
	return r, nil
}

// Release is an operator's fenced takeover of a wedged session, or a
// fenced process letting go of a run its fence stopped (its CAS at the
// run's revision is the fence): no owner process or run, a writer no run
// uses; the epoch stays, so the next claim (any process of the
// deployment) takes it at epoch+1 and counts no death (Attempt).
func Release(r SessionRecord, writer string) (SessionRecord, error) {
	switch r.State {
	case StateEnded:
		return SessionRecord{}, refuse("release", r, "the session has ended")
	case StateQuarantined:
		return SessionRecord{}, refuse("release", r, "quarantined: no owner holds it (retry or end it)")
	case StateHandoff:
		return SessionRecord{}, refuse("release", r, "mid-handoff: the handoff transaction settles it")
	}
	r.OwnerProcess, r.OwnerRunID = "", ""
	r.Writer, r.WriteCounter = writer, 0
	r.UpdatedAt = time.Time{}
	return r, nil
}

// Hibernate unloads a quiet session: the owner run writes state hibernated
// (its next write), keeping ownership; the next claim wakes it.
func Hibernate(r SessionRecord, by Ownership) (SessionRecord, error) {
	if err := held("hibernate", r, by); err != nil {
		return SessionRecord{}, err
	}
	if r.State != StateActive && r.State != StatePaused {
		return SessionRecord{}, refuse("hibernate", r, "only a settled session hibernates")
	}
	r.State = StateHibernated
	r.Writer, r.WriteCounter = by.OwnerRunID, r.WriteCounter+1
	return r, nil
}

// Commit is the owner run's write of a step boundary: the new checkpoint,
// the session's settled state (active, paused or ended) and the writer
// stamp {run, counter} that settles an uncertain write. A completed handoff
// is confirmed by it (its events are in this commit or an earlier one). An
// ended session never becomes live again. A commit that shows progress —
// no step in flight (idle, parked on a wait, paused or ended), or the step
// due at the last commit folded or cancelled — resets the boot attempts; a
// boot or admission commit (the same step, or a first one, due) does not.
// Every commit covers the record's floor event (the run continued from it).
func Commit(r SessionRecord, by Ownership, st State, counter uint64, checkpoint []byte, progress bool) (SessionRecord, error) {
	if err := held("commit", r, by); err != nil {
		return SessionRecord{}, err
	}
	switch {
	case st != StateActive && st != StatePaused && st != StateEnded:
		return SessionRecord{}, refuse("commit", r, "a commit writes active, paused or ended, not %s", st)
	case r.State == StateEnded && st != StateEnded:
		return SessionRecord{}, refuse("commit", r, "the session has ended")
	}
	r = Confirm(r)
	r.State = st
	r.Writer, r.WriteCounter = by.OwnerRunID, counter
	r.Checkpoint = checkpoint
	r.FloorEvent = nil
	if progress {
		r.BootAttempts, r.LastBootError, r.BootAttemptAt = 0, "", time.Time{}
	}
	return r, nil
}

// End is the commit that finalizes the session (done, expired, failed).
func End(r SessionRecord, by Ownership, counter uint64, checkpoint []byte) (SessionRecord, error) {
	return Commit(r, by, StateEnded, counter, checkpoint, true)
}

// Adopt prepares a record that crash recovery is about to claim: a record
// staged for a handoff whose source died becomes active, its outcome
// recorded as failed at step "recover". The claimer then sets its own
// ownership and CASes at the revision it read; a candidate still activating
// at the staged revision then fails its CAS.
func Adopt(r SessionRecord) SessionRecord {
	if r.State != StateHandoff {
		return r
	}
	r.State = StateActive
	if r.Handoff != nil {
		h := *r.Handoff
		h.Outcome, h.Step = OutcomeFailed, StepRecover
		r.Handoff = &h
	}
	return r
}

// Unconfirmed returns the handoff whose activation is the record's last
// ownership change and whose events no commit recorded yet (the successor
// died before its first commit), or nil. An owner claiming such a record
// boots with it, so handoff.started/completed are recorded once.
func Unconfirmed(r SessionRecord) *HandoffOutcome {
	h := r.Handoff
	if h == nil || h.Outcome != OutcomeCompleted || h.Step != StepActivate || h.From == "" || h.Target != r.DeploymentID {
		return nil
	}
	return h
}

// Confirm marks a completed handoff's events as committed (see
// Unconfirmed); the record is returned unchanged otherwise.
func Confirm(r SessionRecord) SessionRecord {
	if h := Unconfirmed(r); h != nil {
		c := *h
		c.Step = StepConfirmed
		r.Handoff = &c
	}
	return r
}

// held refuses a write by a run that does not hold the record at its epoch.
func held(t string, r SessionRecord, by Ownership) error {
	if r.OwnerRunID != by.OwnerRunID || r.Epoch != by.Epoch {
		return refuse(t, r, "held by run %q at epoch %d, not by run %q at epoch %d", r.OwnerRunID, r.Epoch, by.OwnerRunID, by.Epoch)
	}
	return nil
}

func withHandoff(r SessionRecord, st State, h HandoffOutcome) SessionRecord {
	r.State = st
	r.Handoff = &h
	r.UpdatedAt = time.Time{}
	return r
}
