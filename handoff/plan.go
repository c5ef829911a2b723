package handoff

import (
	"fmt"

	"github.com/baton-rt/baton/record"
)

// Step names one step of the transaction. The boundary before and after
// every step is a crash point; docs/handoff.md lists, for each one, what
// the store holds and who recovers it how.
type Step string

// Source-side steps, in the order of a successful handoff (Reclaim only on
// a failure or an uncertain start).
const (
	StepStage        Step = "stage"         // CAS the record active → handoff at the held revision
	StepMark         Step = "mark"          // create the marker (create-only), naming the staged revision
	StepCheckBacklog Step = "check-backlog" // leader read: anything on the inbox after the trigger?
	StepStart        Step = "start"         // request baton.deploy.<target>.start
	StepConfirm      Step = "confirm"       // leader read: is the activation in the record?
	StepReclaim      Step = "reclaim"       // CAS the record back to active at the revision the source holds
	StepCleanup      Step = "cleanup"       // delete the marker (if it is this handoff's)
)

// Candidate-side steps (Activate), in order.
const (
	StepLoad     Step = "load"     // the record at exactly the expected revision (leader)
	StepVerify   Step = "verify"   // record staged for this handoff and target; marker matches
	StepValidate Step = "validate" // the checkpoint is readable by this deployment
	StepActivate Step = "activate" // the claim: ONE CAS at the expected revision
	StepUnmark   Step = "unmark"   // delete the marker
)

// StepDone is what Plan.Next returns once the plan is finished.
const StepDone Step = "done"

// Outcome is the verdict of a transaction for its source.
type Outcome string

// Outcomes.
const (
	// Moved: this handoff's candidate activated. The source exits.
	Moved Outcome = "moved"
	// Kept: the source holds the record again (active, epoch unchanged) and
	// processes the trigger itself.
	Kept Outcome = "kept"
	// Lost: someone else (not this handoff's candidate) holds the record.
	// The source exits without writing anything more.
	Lost Outcome = "lost"
	// Unknown: the transaction could not learn who holds the record. The
	// source stops without writing (see ErrUnresolved).
	Unknown Outcome = "unknown"
)

// Outcomes recorded in the session record (record.HandoffOutcome.Outcome),
// written by record's transitions.
const (
	OutcomeStaged    = record.OutcomeStaged
	OutcomeCompleted = record.OutcomeCompleted
	OutcomeAbandoned = record.OutcomeAbandoned
	OutcomeFailed    = record.OutcomeFailed
)

// SkipQueued is the handoff.skipped reason of an abandoned handoff (the
// same string as runtime.SkipQueued and wire's enum).
const SkipQueued = "queued"

// MaxReclaims bounds the reclaim CASes of one transaction. Each extra one
// follows a write of the source's own that landed late, or a conflict the
// store reported although the record had not moved; past the bound the
// verdict is Unknown.
const MaxReclaims = 4

// MaxStages bounds the stage CASes. A stage is tried again only when a
// leader read shows the record still at the revision it expected: on a
// replicated stream the server refuses a CAS on a key whose previous write
// it has acknowledged but not yet finished applying (error 10164, which kv
// reports as a conflict), and a lost reply may also hide a write still in
// flight. The same CAS again is safe: if the first one lands, the retry
// conflicts and the next read shows the stage.
const MaxStages = 3

// Holder classifies a leader read of the session record relative to one
// handoff (see Classify).
type Holder int

// Holders.
const (
	HolderOther     Holder = iota // anyone else, or no record: the source is fenced
	HolderSource                  // the source's run and epoch, active, not marked by this handoff
	HolderStaged                  // the source's run and epoch, staged for this handoff
	HolderReclaimed               // the source's run and epoch, active again after this handoff
	HolderTarget                  // this handoff's candidate activated (the record says completed)
)

var holderNames = [...]string{"other", "source", "staged", "reclaimed", "target"}

func (h Holder) String() string {
	if int(h) < len(holderNames) {
		return holderNames[h]
	}
	return fmt.Sprintf("Holder(%d)", int(h))
}

// Signal is what performing an action reported.
type Signal int

// Signals.
const (
	SigOK        Signal = iota + 1 // the write landed (Revision), the check was clear, the start activated
	SigRead                        // a leader read after a lost CAS or a lost reply, or Confirm's read: see Holder
	SigBacklog                     // CheckBacklog found a later command
	SigRefused                     // Start: refused, or nobody listening — definitely before activation
	SigUncertain                   // Start: outcome unknown (timeout, lost reply)
	SigFailed                      // Mark or CheckBacklog failed without deciding anything
)

var signalNames = [...]string{"", "ok", "read", "backlog", "refused", "uncertain", "failed"}

func (s Signal) String() string {
	if s > 0 && int(s) < len(signalNames) {
		return signalNames[s]
	}
	return fmt.Sprintf("Signal(%d)", int(s))
}

// Observation is the result of one action, fed back with Plan.Advance.
type Observation struct {
	Signal   Signal
	Revision uint64 // SigOK of Stage or Reclaim: the new revision; SigRead: the revision read
	Holder   Holder // SigRead
	Reason   string // why (refusal text, error, the sequence found...)
}

// Action is the next thing to perform.
type Action struct {
	Step Step
	// Revision is, for Stage and Reclaim, the revision the CAS expects; for
	// Mark, CheckBacklog, Start and Confirm, the staged revision (the
	// candidate's expected one).
	Revision uint64
	// Record and FailedAt are what Reclaim writes into the record's
	// handoff outcome: OutcomeAbandoned or OutcomeFailed, and the step.
	Record   string
	FailedAt Step
}

// Failure says where and why a handoff failed before activation.
type Failure struct {
	Step   Step
	Reason string
}

func (f *Failure) String() string {
	if f == nil {
		return ""
	}
	return string(f.Step) + ": " + f.Reason
}

// Verdict is a finished plan's decision.
type Verdict struct {
	Outcome    Outcome
	Revision   uint64   // Kept: the revision the source now holds
	SkipReason string   // Kept after a backlog: SkipQueued
	Failure    *Failure // Kept (or Unknown) after a failure
}

// Plan is the source side of the handoff as a pure state machine: it does
// no I/O and reads no clock. The executor asks Next for an action, performs
// it, and feeds what happened to Advance, until Done. Every decision the
// transaction makes is here, so it is tested exhaustively without a
// server; the executor only translates store answers into Observations.
type Plan struct {
	next     Action
	staged   uint64
	stages   int
	reclaims int
	record   string // outcome a reclaim writes
	verdict  Verdict
	done     bool
	steps    []Step
}

// NewPlan starts a plan for a source that holds the record at revision.
func NewPlan(revision uint64) *Plan {
	return &Plan{next: Action{Step: StepStage, Revision: revision}, record: OutcomeFailed}
}

// Next is the action to perform now; StepDone once finished.
func (p *Plan) Next() Action {
	if p.done {
		return Action{Step: StepDone}
	}
	return p.next
}

// Done reports whether the plan is finished.
func (p *Plan) Done() bool { return p.done }

// Verdict is the decision; meaningful once Done.
func (p *Plan) Verdict() Verdict { return p.verdict }

// Steps lists the steps performed so far, in order.
func (p *Plan) Steps() []Step { return append([]Step(nil), p.steps...) }

// Advance feeds the observation of the action Next returned. An
// observation that cannot follow that action is a bug in the caller and is
// refused without changing the plan.
func (p *Plan) Advance(o Observation) error {
	if p.done {
		return fmt.Errorf("handoff: plan finished; got %s", o.Signal)
	}
	if !accepts(p.next.Step, o.Signal) {
		return fmt.Errorf("handoff: step %s cannot report %s", p.next.Step, o.Signal)
	}
	p.steps = append(p.steps, p.next.Step)
	switch p.next.Step {
	case StepStage:
		p.afterStage(o)
	case StepMark:
		p.afterMark(o)
	case StepCheckBacklog:
		p.afterCheck(o)
	case StepStart:
		p.afterStart(o)
	case StepConfirm:
		p.afterConfirm(o)
	case StepReclaim:
		p.afterReclaim(o)
	case StepCleanup:
		p.done = true
	}
	return nil
}

// accepts lists the signals each step may report.
func accepts(s Step, sig Signal) bool {
	switch s {
	case StepStage, StepReclaim:
		return sig == SigOK || sig == SigRead
	case StepMark:
		return sig == SigOK || sig == SigFailed
	case StepCheckBacklog:
		return sig == SigOK || sig == SigBacklog || sig == SigFailed
	case StepStart:
		return sig == SigOK || sig == SigRefused || sig == SigUncertain
	case StepConfirm:
		return sig == SigRead
	case StepCleanup:
		return sig == SigOK
	}
	return false
}

func (p *Plan) afterStage(o Observation) {
	switch {
	case o.Signal == SigOK, o.Holder == HolderStaged: // landed (reply seen or not)
		p.staged = o.Revision
		p.next = Action{Step: StepMark, Revision: o.Revision}
	case o.Holder == HolderSource && o.Revision == p.next.Revision && p.stages < MaxStages-1:
		p.stages++ // not landed (yet): the same CAS again
	case o.Holder == HolderSource: // give up: the reclaim fences a late landing
		p.fail(StepStage, "stage write not seen: "+o.Reason)
		p.reclaimAt(o.Revision)
	default:
		p.settle(o)
	}
}

func (p *Plan) afterMark(o Observation) {
	if o.Signal == SigOK {
		p.next = Action{Step: StepCheckBacklog, Revision: p.staged}
		return
	}
	p.fail(StepMark, o.Reason)
	p.reclaimAt(p.staged)
}

func (p *Plan) afterCheck(o Observation) {
	switch o.Signal {
	case SigOK:
		p.next = Action{Step: StepStart, Revision: p.staged}
	case SigBacklog:
		p.verdict.SkipReason, p.record = SkipQueued, OutcomeAbandoned
		p.reclaimAt(p.staged)
	default:
		p.fail(StepCheckBacklog, o.Reason)
		p.reclaimAt(p.staged)
	}
}

func (p *Plan) afterStart(o Observation) {
	if o.Signal == SigOK {
		p.next = Action{Step: StepConfirm, Revision: p.staged}
		return
	}
	// Refused or uncertain: either way resolved by a CAS at the staged
	// revision — success fences a candidate that has not activated.
	p.fail(StepStart, o.Reason)
	p.reclaimAt(p.staged)
}

func (p *Plan) afterConfirm(o Observation) {
	if o.Holder == HolderStaged {
		p.fail(StepConfirm, "start reported activation but the record is still staged")
	}
	p.settle(o)
}

func (p *Plan) afterReclaim(o Observation) {
	if o.Signal == SigOK {
		p.keep(o.Revision)
		return
	}
	p.settle(o)
}

// settle acts on a leader read: whoever the record names decides.
func (p *Plan) settle(o Observation) {
	switch o.Holder {
	case HolderTarget:
		p.verdict.Outcome = Moved
		p.cleanup()
	case HolderReclaimed:
		p.fail(p.next.Step, "reclaimed before: "+o.Reason)
		p.keep(o.Revision)
	case HolderStaged, HolderSource:
		p.fail(p.next.Step, "source write not seen: "+o.Reason)
		p.reclaimAt(o.Revision)
	default:
		p.verdict.Outcome = Lost
		p.done = true
	}
}

func (p *Plan) keep(rev uint64) {
	p.verdict.Outcome, p.verdict.Revision = Kept, rev
	p.cleanup()
}

func (p *Plan) cleanup() { p.next = Action{Step: StepCleanup} }

// fail records the first failure; a backlog skip is not a failure.
func (p *Plan) fail(s Step, reason string) {
	if p.verdict.Failure == nil && p.verdict.SkipReason == "" {
		p.verdict.Failure = &Failure{Step: s, Reason: reason}
	}
}

func (p *Plan) reclaimAt(rev uint64) {
	p.reclaims++
	if p.reclaims > MaxReclaims {
		p.verdict.Outcome = Unknown
		p.done = true
		return
	}
	at := StepCheckBacklog
	if f := p.verdict.Failure; f != nil {
		at = f.Step
	}
	p.next = Action{Step: StepReclaim, Revision: rev, Record: p.record, FailedAt: at}
}
