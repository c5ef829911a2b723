package pool

import (
	"fmt"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/wire"
)

// Faults are deterministic fault injection points for tests. cmd/owner's
// hidden --fault flag wires the After* hooks to SIGKILL the process.
type Faults struct {
	// LoseCommitReply reports, per commit, whether to drop the reply of a
	// commit CAS that landed (the write is durable, the owner is told it is
	// uncertain).
	LoseCommitReply func(sessionID string) bool
	// DropCommit reports, per commit, whether to not send the commit CAS
	// and report its outcome uncertain (a stream without a leader that
	// never answered it).
	DropCommit func(sessionID string) bool
	// AliasHooked runs after a live session created the hook of a new alias
	// and before it recreates its consumer over the alias's subject, so a
	// test can publish into that window.
	AliasHooked func(sessionID, alias string)
	// LoseLeaseReply reports, per lease renewal that landed, whether to
	// drop its reply (the renewal is settled by reading the lease back).
	LoseLeaseReply func() bool
	// FailLeaseRenewal reports, per lease renewal, whether to fail it
	// without sending it, as a bucket with no leader fails it: past its
	// fence deadline the process pauses until a renewal lands.
	FailLeaseRenewal func() bool
	// AfterCommit runs right after a commit CAS succeeded, before any of
	// the commit's events is published.
	AfterCommit func(sessionID string)
	// AfterJournal runs right after a step's journal entry was written,
	// before StepInput.Do returns its result.
	AfterJournal func(sessionID string)
	// BeforeCommit runs when a step's result reached its session, before
	// the commit that folds it.
	BeforeCommit func(sessionID string)
	// AfterIndex runs when Load (recovery, wake, takeover) has written the
	// index entry and before it claims the session.
	AfterIndex func(sessionID string)
	// AfterClaim runs when Load's claim CAS succeeded, before the consumer
	// is created.
	AfterClaim func(sessionID string)
	// RefuseActivation reports, per handoff request this process serves as
	// the target, whether its checkpoint validation fails (the target
	// cannot read the checkpoint; the source keeps the session).
	RefuseActivation func(sessionID string) bool
	// ReadStateVersion, when positive, makes this process read checkpoints
	// of state versions up to it only, as a build of that version would: a
	// handoff target then refuses a newer checkpoint before it activates
	// (the rollback tests).
	ReadStateVersion int
	// DropWake reports, per wake request received from another process
	// (ingress, task runner, sweeper of a peer), whether to ignore it, as
	// if it was lost in flight.
	DropWake func(req protocol.WakeRequest) bool
	// Hibernating runs at each step of a hibernation: "cas" (the record
	// says hibernated, the consumer still delivers), "consumer" (the
	// consumer is deleted, the session is still in memory) and "left"
	// (out of memory, before the inbox re-check), so a test can publish
	// into each window.
	Hibernating func(sessionID, step string)
	// HandoffSource injects faults at the named steps of the handoff
	// transaction this process runs as a source (handoff.Txn.Hooks; the
	// steps of handoff/plan.go, docs/handoff.md "Crash points"): a non-nil
	// error stops the transaction there, as a crash would, and the session
	// stops unresolved.
	HandoffSource handoff.Hooks
	// HandoffCandidate injects faults at the named steps of the activations
	// this process serves as a handoff candidate (handoff.Candidate.Hooks):
	// a non-nil error stops the activation there, as a crash would.
	HandoffCandidate handoff.Hooks
	// AfterConsumer runs when a session's run has created its inbox
	// consumer, before it deletes the predecessor's consumer and boots the
	// machine. A non-nil error stops the run there, as a crash would.
	AfterConsumer func(sessionID string, reason runtime.BootReason) error
	// HoldLeaseRenewal reports, per due lease renewal (and per attempt to
	// acquire the lease again after a fence), whether to skip it (a process
	// that cannot renew at all, as if frozen past its lease): held at its
	// fence deadline, the process fences itself there instead of pausing,
	// and the server expires the lease.
	HoldLeaseRenewal func() bool
}

func (f *Faults) dropWake(req protocol.WakeRequest) bool {
	return f != nil && f.DropWake != nil && f.DropWake(req)
}

func (f *Faults) handoffSource() handoff.Hooks {
	if f == nil {
		return handoff.Hooks{}
	}
	return f.HandoffSource
}

func (f *Faults) handoffCandidate() handoff.Hooks {
	if f == nil {
		return handoff.Hooks{}
	}
	return f.HandoffCandidate
}

func (f *Faults) holdLeaseRenewal() bool {
	return f != nil && f.HoldLeaseRenewal != nil && f.HoldLeaseRenewal()
}

func (f *Faults) refuseActivation(id string) bool {
	return f != nil && f.RefuseActivation != nil && f.RefuseActivation(id)
}

// readable refuses a checkpoint above ReadStateVersion as an older build's
// wire.DecodeCheckpoint would.
func (f *Faults) readable(cp []byte) error {
	if f == nil || f.ReadStateVersion <= 0 {
		return nil
	}
	v, err := wire.ReadStateVersion(cp)
	if err == nil && v > f.ReadStateVersion {
		err = &wire.StateError{StateV: v, Err: wire.ErrUnsupportedState,
			Reason: fmt.Sprintf("fault: this build reads state versions %d to %d", wire.MinStateVersion, f.ReadStateVersion)}
	}
	return err
}

func (f *Faults) failLeaseRenewal() bool {
	return f != nil && f.FailLeaseRenewal != nil && f.FailLeaseRenewal()
}

func (f *Faults) loseLeaseReply() bool {
	return f != nil && f.LoseLeaseReply != nil && f.LoseLeaseReply()
}

func (f *Faults) afterIndex(id string) {
	if f != nil && f.AfterIndex != nil {
		f.AfterIndex(id)
	}
}

func (f *Faults) afterClaim(id string) {
	if f != nil && f.AfterClaim != nil {
		f.AfterClaim(id)
	}
}

// session maps the owner process's session fault points onto the session's.
func (f *Faults) session() *session.Faults {
	if f == nil {
		return nil
	}
	return &session.Faults{
		LoseCommitReply: f.LoseCommitReply, DropCommit: f.DropCommit, AliasHooked: f.AliasHooked, AfterCommit: f.AfterCommit,
		AfterConsumer: f.AfterConsumer, Hibernating: f.Hibernating,
		AfterJournal: f.AfterJournal, BeforeCommit: f.BeforeCommit,
	}
}
