package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/internal/failpoint"
	"github.com/baton-rt/baton/internal/stages"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/oklog/ulid/v2"
)

// perform carries out one effect and returns the inputs its synchronous
// result feeds back.
func (s *Session) perform(ctx context.Context, e runtime.Effect) ([]runtime.Input, error) {
	// A process whose lease is not valid does nothing more for its
	// sessions (no commit, publish, step, timer, task...): it may have been
	// frozen past its lease while a peer took the session over. While its
	// renewal is only overdue the effect waits for it (a paused process);
	// a fence stops the run.
	if _, cancel := e.(runtime.CancelStep); !cancel {
		if err := s.env.Process.AwaitLease(ctx); err != nil {
			if s.cancel != nil {
				s.cancel()
			}
			return nil, err
		}
	}
	switch e := e.(type) {
	case runtime.Commit:
		return s.commit(ctx, e)
	case runtime.ResolveCommit:
		return s.resolve(ctx)
	case runtime.Publish:
		return nil, s.pub.publish(ctx, e.Events)
	case runtime.RunStep:
		s.runStep(ctx, e)
	case runtime.CancelStep:
		if s.cancel != nil {
			s.cancel()
		}
	case runtime.Handoff:
		return s.handoff(ctx, e)
	case runtime.ArmTimer:
		if e.Debounce {
			return nil, s.env.Timers.ArmDebounce(ctx, s.id, e.Timer)
		}
		return nil, s.env.Timers.Arm(ctx, s.id, e.Timer)
	case runtime.StartTask:
		return nil, s.env.Tasks.StartTask(ctx, s.id, e.Task)
	case runtime.ClaimAlias:
		return nil, s.claimAlias(ctx, e.Token)
	case runtime.SendCommands:
		return s.send(ctx, e.Sends)
	case runtime.Purge:
		s.cur.purge(e.Below, time.Now())
	case runtime.Forget:
		return s.forget(ctx, e)
	case runtime.Cleanup:
		return nil, s.cleanup(ctx, e)
	default:
		return nil, fmt.Errorf("session: unknown effect %T", e)
	}
	return nil, nil
}

// send performs a commit's sends; those that create a child on a
// deployment with no live owner come back pending, for the machine to
// keep and a sender to retry outside the loop.
func (s *Session) send(ctx context.Context, sends []runtime.Send) ([]runtime.Input, error) {
	pending, err := s.env.Sends.Send(ctx, s.id, sends)
	if err != nil || len(pending) == 0 {
		return nil, err
	}
	return []runtime.Input{runtime.SendsPending{Sends: pending}}, nil
}

// forget deletes applied commands from the inbox, so the next commit may
// drop them from the applied set. A failed delete keeps them there: the
// machine asks again at a later commit.
func (s *Session) forget(ctx context.Context, f runtime.Forget) ([]runtime.Input, error) {
	if err := s.env.Inbox.Forget(ctx, f.Seqs); err != nil {
		s.log.Warn("applied commands not deleted from the inbox; kept in the applied set", "n", len(f.Seqs), "err", err)
		return []runtime.Input{runtime.Forgotten{Kept: f.Seqs}}, nil
	}
	return []runtime.Input{runtime.Forgotten{Seqs: f.Seqs}}, nil
}

// commit is the one CAS of the session record.
func (s *Session) commit(ctx context.Context, c runtime.Commit) ([]runtime.Input, error) {
	stages.Mark(s.id, "machine")
	if err := s.pub.await(); err != nil {
		return nil, err
	}
	stages.Mark(s.id, "outbox.awaited")
	rec, outbox, err := s.record(ctx, c.Snapshot)
	stages.Mark(s.id, "checkpoint")
	if code := refusal(err); code != "" {
		return nil, s.refused(ctx, code, err)
	}
	if err != nil {
		return nil, err
	}
	var rev uint64
	if s.env.Failpoints.Hit(failpoint.DropCommit, failpoint.Args{SessionID: s.id}) {
		err = errCommitDropped
	} else {
		rev, err = s.env.Records.UpdateSession(ctx, rec, s.rev)
	}
	if err == nil && s.env.Failpoints.Hit(failpoint.LoseCommitReply, failpoint.Args{SessionID: s.id}) {
		err = errReplyLost // the write landed; pretend its reply was lost
	}
	if err != nil && ctx.Err() != nil {
		// Stopping (shutdown or fence): the next owner's claim settles
		// whether this commit landed.
		return nil, ctx.Err()
	}
	switch {
	case err == nil:
		stages.Mark(s.id, "committed")
		s.rec, s.rev, s.pub.outbox, s.due = rec, rev, outbox, dueStep(c.Snapshot)
		if rec.BootAttempts == 0 {
			s.env.Process.Settled(s.id) // it did not kill the process
		}
		s.committedState(ctx)
		s.indexCommitted(rev)
		s.env.Observer.Committed(outbox)
		s.env.Failpoints.Run(failpoint.AfterCommit, failpoint.Args{SessionID: s.id})
		return []runtime.Input{runtime.CommitDone{Outcome: runtime.CommitOK}}, nil
	case errors.Is(err, record.ErrConflict):
		s.env.Observer.Conflict("commit")
		s.log.Warn("commit lost the CAS: ownership moved on, stopping", "rev", s.rev)
		return []runtime.Input{runtime.CommitDone{Outcome: runtime.CommitConflict}}, nil
	case refusal(err) != "":
		return nil, s.refused(ctx, refusal(err), err)
	default:
		s.log.Warn("commit outcome uncertain, settling by leader read", "err", err)
		s.pendingRec, s.pendingOutbox, s.pendingDue = rec, outbox, dueStep(c.Snapshot)
		return []runtime.Input{runtime.CommitDone{Outcome: runtime.CommitUncertain}}, nil
	}
}

// resolve settles an uncertain commit through the store's one settle
// (Records.SettleUpdate, DESIGN §5): the record carries this run's write →
// it landed; the record still at the revision the commit expected → it did
// not land and nobody wrote since, so the same CAS is sent again once the
// lease allows (a stream without a leader refuses or drops a write; sending
// it again once the leader is back is the cost of an election, not of a
// re-claim); anything else → this owner is fenced.
//
// The pending record carries the machine's writer stamp (ResolveCommit's
// Writer): record.Commit writes the run and the snapshot's write counter.
func (s *Session) resolve(ctx context.Context) ([]runtime.Input, error) {
	rev, err := s.env.Records.SettleUpdate(ctx, s.pendingRec, s.rev, s.env.Process.AwaitLease)
	switch {
	case err == nil:
		s.log.Info("uncertain commit settled: it landed", "rev", rev)
		s.rec, s.rev, s.pub.outbox, s.due = s.pendingRec, rev, s.pendingOutbox, s.pendingDue
		s.committedState(ctx)
		s.indexCommitted(rev)
		return []runtime.Input{runtime.CommitDone{Outcome: runtime.CommitOK}}, nil
	case errors.Is(err, record.ErrConflict):
		s.log.Warn("uncertain commit did not land: fenced, stopping", "err", err)
		return []runtime.Input{runtime.CommitDone{Outcome: runtime.CommitConflict}}, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	s.log.Warn("uncertain commit not settled: stopping", "err", err)
	return nil, fmt.Errorf("session: settle commit of %s: %w", s.id, err)
}

// handoff hands the machine's decision to the host's handoff transaction.
// The cursor closes first, so nothing but the trigger reaches this owner
// while the record is staged. Kept: the session continues at the record the
// transaction left (the cursor is reopened at Applied.Next). Moved or Lost:
// the machine stops without writing; the successor deletes the cursor. Any
// error but handoff.ErrInvalid stops the session unresolved: a later claim
// (restart) settles the record.
func (s *Session) handoff(ctx context.Context, h runtime.Handoff) ([]runtime.Input, error) {
	s.cur.close()
	req := handoff.Request{
		HandoffID: newID(), SessionID: s.id, SourceRun: s.runID, Source: s.env.Deployment, Target: h.Target,
		Trigger: handoff.Trigger{CommandID: h.Trigger.ID, Seq: h.Trigger.Seq},
		Tokens:  append([]string(nil), s.cur.tokens...), Record: record.Session{Record: s.rec, Revision: s.rev},
	}
	stages.Mark(s.id, "handoff.begin")
	res, err := s.env.Handoffs.Handoff(ctx, req)
	stages.Mark(s.id, "handoff.returned")
	switch {
	case errors.Is(err, ErrHandoffDisabled):
		s.log.Info("handoff requested but handoff is disabled; keeping the session", "target", h.Target)
		return []runtime.Input{runtime.HandoffDone{}}, s.reopen(ctx)
	case errors.Is(err, handoff.ErrInvalid):
		s.log.Warn("handoff request invalid; keeping the session", "target", h.Target, "err", err)
		return []runtime.Input{runtime.HandoffDone{}}, s.reopen(ctx)
	case err != nil:
		return nil, fmt.Errorf("session %s: handoff %s to %s unresolved: %w", s.id, req.HandoffID, h.Target, err)
	}
	switch res.Outcome {
	case handoff.Moved, handoff.Lost:
		s.log.Info("session handed off", "handoff", req.HandoffID, "target", h.Target, "outcome", res.Outcome,
			"owner", res.Session.Record.OwnerProcess, "epoch", res.Session.Record.Epoch)
		if rerr := s.env.Process.RemoveIndex(context.WithoutCancel(ctx), s.id); rerr != nil {
			s.log.Debug("remove index entry after handoff", "err", rerr)
		}
		return []runtime.Input{runtime.HandoffDone{Moved: true, HandoffID: req.HandoffID}}, nil
	}
	s.rec, s.rev = res.Session.Record, res.Session.Revision
	done := runtime.HandoffDone{SkipReason: res.SkipReason, HandoffID: req.HandoffID}
	if res.Failure != nil {
		s.log.Info("handoff failed; keeping the session", "handoff", req.HandoffID, "target", h.Target,
			"step", res.Failure.Step, "reason", res.Failure.Reason)
		if done.SkipReason == "" { // the machine records handoff.started + handoff.failed
			done.Failure = string(res.Failure.Step) + ": " + res.Failure.Reason
		}
	}
	if err := s.reopen(ctx); err != nil {
		return nil, err
	}
	return []runtime.Input{done}, nil
}

func newID() string { return ulid.Make().String() }
