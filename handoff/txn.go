package handoff

import (
	"context"
	"errors"
	"fmt"
	"github.com/baton-rt/baton/internal/failpoint"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/cenkalti/backoff/v4"
)

// Defaults of Txn.
const (
	DefaultStartTimeout   = 10 * time.Second
	DefaultStartAttempt   = time.Second
	DefaultResolveTimeout = 30 * time.Second
)

// Txn is the executor of the source side: it performs the actions of a
// Plan against a Store, a Starter and a Backlog. It holds no state between
// runs; one Txn serves every session of a process.
type Txn struct {
	Store   Store
	Starter Starter
	Backlog Backlog
	// StartTimeout bounds the start request (load, validation, hydration
	// and the claim on the candidate). A timeout is an uncertain start,
	// resolved by the reclaim CAS.
	StartTimeout time.Duration
	// StartAttempt bounds one start request within StartTimeout: a request
	// unanswered that long is sent again, to whichever candidate process
	// the target's queue group picks, so one frozen candidate (SIGSTOP, a
	// stalled machine) costs an attempt, not the whole StartTimeout. A
	// second request is safe: one activation CAS at the staged revision
	// wins, and a candidate asked after it answers the recorded activation
	// (Replayed) without running the session.
	StartAttempt time.Duration
	// ResolveTimeout bounds the leader reads and CASes that settle an
	// uncertain write, the reclaim and the clean-up. They run under
	// context.WithoutCancel, so a cancelled ctx still leaves a settled
	// record behind whenever the store answers.
	ResolveTimeout time.Duration
	// Failpoints are the armed fault injection points (tests only; nil
	// arms none): failpoint.HandoffSourceBefore and After.
	Failpoints *failpoint.Registry
}

// Result is the outcome of Run.
type Result struct {
	Outcome Outcome
	// Session is, for Kept, the record and revision the source now holds
	// (its next commit CASes at Session.Revision); for Moved and Lost the
	// last record read (the successor's, for handoff.completed); for
	// Unknown the last record the source knew it held.
	Session    record.Session
	SkipReason string   // Kept after a backlog: "queued" (record handoff.skipped)
	Failure    *Failure // Kept after a failure before activation (record handoff.failed)
	Steps      []Step   // the steps performed, in order
	// CleanupErr is set when the marker could not be removed; Clean on the
	// next claim or stage removes it.
	CleanupErr error
}

// Run performs one handoff attempt for a source holding req.Record.
//
// err == nil: Outcome is Moved, Kept or Lost. An invalid request writes
// nothing and returns Kept with the original record and an error matching
// ErrInvalid. Any other error (ErrUnresolved, or a hook's stop) comes with
// Outcome Unknown: the source stops the session without writing.
func (t Txn) Run(ctx context.Context, req Request) (Result, error) {
	if err := t.check(req); err != nil {
		return Result{Outcome: Kept, Session: req.Record, Failure: &Failure{Step: StepStage, Reason: err.Error()}}, err
	}
	x := &run{t: t.withDefaults(), req: req, plan: NewPlan(req.Record.Revision), cur: req.Record}
	for !x.plan.Done() {
		o, err := x.do(ctx, x.plan.Next())
		if err == nil {
			err = x.plan.Advance(o)
		}
		if err != nil {
			return x.result(Unknown), err
		}
	}
	if x.plan.Verdict().Outcome == Unknown {
		return x.result(Unknown), fmt.Errorf("%w: session %s: more than %d reclaims", ErrUnresolved, req.SessionID, MaxReclaims)
	}
	return x.result(x.plan.Verdict().Outcome), nil
}

func (t Txn) check(req Request) error {
	if t.Store == nil || t.Starter == nil || t.Backlog == nil {
		return fmt.Errorf("%w: Txn needs a Store, a Starter and a Backlog", ErrInvalid)
	}
	return req.validate()
}

func (t Txn) withDefaults() Txn {
	if t.StartTimeout <= 0 {
		t.StartTimeout = DefaultStartTimeout
	}
	if t.ResolveTimeout <= 0 {
		t.ResolveTimeout = DefaultResolveTimeout
	}
	if t.StartAttempt <= 0 || t.StartAttempt > t.StartTimeout {
		t.StartAttempt = min(DefaultStartAttempt, t.StartTimeout)
	}
	return t
}

// run is one execution of a plan.
type run struct {
	t          Txn
	req        Request
	plan       *Plan
	cur        record.Session // newest record the source is known to hold
	last       record.Session // newest record read
	cleanupErr error
}

func (x *run) result(o Outcome) Result {
	v := x.plan.Verdict()
	r := Result{Outcome: o, Session: x.cur, SkipReason: v.SkipReason, Failure: v.Failure,
		Steps: x.plan.Steps(), CleanupErr: x.cleanupErr}
	if o == Moved || o == Lost {
		r.Session = x.last
	}
	return r
}

func (x *run) do(ctx context.Context, a Action) (Observation, error) {
	if err := x.hooks().runBefore(a.Step); err != nil {
		return Observation{}, err
	}
	switch a.Step {
	case StepStage:
		return x.stage(ctx, a)
	case StepMark:
		return x.mark(ctx, a)
	case StepCheckBacklog:
		return x.checkBacklog(ctx)
	case StepStart:
		return x.start(ctx, a)
	case StepConfirm:
		return x.confirm(ctx)
	case StepReclaim:
		return x.reclaim(ctx, a)
	case StepCleanup:
		return x.cleanup(ctx)
	}
	return Observation{}, fmt.Errorf("handoff: unknown step %q", a.Step)
}

// stage CASes the held record to state handoff, recording the attempt.
func (x *run) stage(ctx context.Context, a Action) (Observation, error) {
	rec, err := record.Stage(x.cur.Record, x.source(), x.req.HandoffID, x.req.Target)
	if err != nil {
		return Observation{Signal: SigFailed, Reason: "stage: " + err.Error()}, nil
	}
	rev, err := x.t.Store.UpdateSession(ctx, rec, a.Revision)
	if herr := x.hooks().runAfter(StepStage, &err); herr != nil {
		return Observation{}, herr
	}
	if err != nil {
		return x.read(ctx, err)
	}
	x.cur = record.Session{Record: rec, Revision: rev}
	return Observation{Signal: SigOK, Revision: rev}, nil
}

// source is the ownership of the source run that stages and reclaims.
func (x *run) source() record.Ownership {
	return record.Ownership{SessionID: x.req.SessionID, OwnerRunID: x.req.SourceRun, Epoch: x.req.Record.Record.Epoch}
}

// mark creates the marker. A marker of an earlier, finished handoff is
// removed (Clean) and the create retried once; an uncertain create is
// settled by reading the marker back.
func (x *run) mark(ctx context.Context, a Action) (Observation, error) {
	m := record.Marker{HandoffID: x.req.HandoffID, SessionID: x.req.SessionID, SourceRun: x.req.SourceRun,
		Target: x.req.Target, TriggerSeq: x.req.Trigger.Seq, TriggerCommandID: x.req.Trigger.CommandID,
		StagedRevision: a.Revision}
	_, err := x.t.Store.CreateMarker(ctx, m)
	if herr := x.hooks().runAfter(StepMark, &err); herr != nil {
		return Observation{}, herr
	}
	var owned *record.OwnedError
	if errors.As(err, &owned) && owned.Owner != "" && owned.Owner != x.req.HandoffID {
		if _, cerr := Clean(ctx, x.t.Store, x.req.SessionID); cerr == nil {
			_, err = x.t.Store.CreateMarker(ctx, m)
		}
	}
	if err == nil || x.ownMarker(ctx, a.Revision) {
		return Observation{Signal: SigOK}, nil
	}
	return Observation{Signal: SigFailed, Reason: "marker: " + err.Error()}, nil
}

func (x *run) ownMarker(ctx context.Context, staged uint64) bool {
	m, _, err := x.t.Store.GetMarker(ctx, x.req.SessionID)
	return err == nil && m.HandoffID == x.req.HandoffID && m.StagedRevision == staged
}

func (x *run) checkBacklog(ctx context.Context) (Observation, error) {
	seq, err := x.t.Backlog.After(ctx, x.req.Tokens, x.req.Trigger.Seq)
	if herr := x.hooks().runAfter(StepCheckBacklog, &err); herr != nil {
		return Observation{}, herr
	}
	switch {
	case err != nil:
		return Observation{Signal: SigFailed, Reason: "backlog check: " + err.Error()}, nil
	case seq != 0:
		return Observation{Signal: SigBacklog, Reason: fmt.Sprintf("inbox sequence %d arrived after the trigger %d", seq, x.req.Trigger.Seq)}, nil
	}
	return Observation{Signal: SigOK}, nil
}

func (x *run) start(ctx context.Context, a Action) (Observation, error) {
	req := protocol.HandoffStart{DeploymentID: x.req.Target, HandoffID: x.req.HandoffID, SessionID: x.req.SessionID, ExpectedRevision: a.Revision}
	reply, err := x.startAttempts(ctx, req)
	if herr := x.hooks().runAfter(StepStart, &err); herr != nil {
		return Observation{}, herr
	}
	return startSignal(req, reply, err), nil
}

// startAttempts sends the start request until it is answered (or nobody
// received it), each attempt bounded by StartAttempt, all by StartTimeout.
func (x *run) startAttempts(ctx context.Context, req protocol.HandoffStart) (protocol.HandoffStartReply, error) {
	deadline := time.Now().Add(x.t.StartTimeout)
	for {
		end := time.Now().Add(x.t.StartAttempt)
		if end.After(deadline) {
			end = deadline
		}
		actx, cancel := context.WithDeadline(ctx, end)
		reply, err := x.t.Starter.Start(actx, req)
		timedOut := actx.Err() != nil
		cancel()
		if err == nil || !timedOut || ctx.Err() != nil || !time.Now().Before(deadline) {
			return reply, err
		}
	}
}

// startSignal interprets a start answer. Only "nobody received it" and an
// explicit refusal are definite; everything else is uncertain. Both lead to
// the same reclaim CAS, so a misjudgement costs a reason string, never an
// owner.
func startSignal(req protocol.HandoffStart, reply protocol.HandoffStartReply, err error) Observation {
	switch {
	case errors.Is(err, ErrNoResponders):
		return Observation{Signal: SigRefused, Reason: err.Error()}
	case err != nil:
		return Observation{Signal: SigUncertain, Reason: "start: " + err.Error()}
	case reply.Error != nil && reply.Error.Code == protocol.CodeUncertain:
		return Observation{Signal: SigUncertain, Reason: reply.Error.Error()}
	case reply.Error != nil:
		return Observation{Signal: SigRefused, Reason: reply.Error.Error()}
	case !reply.Activated:
		return Observation{Signal: SigRefused, Reason: "the responder did not activate (not a handoff responder?)"}
	case reply.HandoffID != req.HandoffID || reply.SessionID != req.SessionID:
		return Observation{Signal: SigUncertain, Reason: fmt.Sprintf("reply names handoff %q of session %q", reply.HandoffID, reply.SessionID)}
	}
	return Observation{Signal: SigOK}
}

// confirm reads the record: the activation must be in it.
func (x *run) confirm(ctx context.Context) (Observation, error) {
	o, err := x.read(ctx, nil)
	if herr := x.hooks().runAfter(StepConfirm, &err); herr != nil {
		return Observation{}, herr
	}
	if errors.Is(err, ErrReplyLost) {
		return x.read(ctx, err)
	}
	return o, err
}

// reclaim CASes the record back to active at a.Revision, recording the
// outcome. Success fences a candidate that has not activated.
func (x *run) reclaim(ctx context.Context, a Action) (Observation, error) {
	if x.cur.Revision != a.Revision {
		return Observation{}, fmt.Errorf("handoff: reclaim at %d but the source holds %d", a.Revision, x.cur.Revision)
	}
	rctx, cancel := x.resolveCtx(ctx)
	defer cancel()
	rec, err := record.Reclaim(x.cur.Record, x.source(), x.req.HandoffID, a.Record, string(a.FailedAt))
	if err != nil {
		return Observation{}, fmt.Errorf("handoff: %w", err)
	}
	rev, err := x.t.Store.UpdateSession(rctx, rec, a.Revision)
	if herr := x.hooks().runAfter(StepReclaim, &err); herr != nil {
		return Observation{}, herr
	}
	if err != nil {
		return x.read(ctx, err)
	}
	x.cur = record.Session{Record: rec, Revision: rev}
	return Observation{Signal: SigOK, Revision: rev}, nil
}

// cleanup removes the marker if it is still this handoff's. Failure is
// reported, not fatal: a leftover marker is stale and Clean removes it.
func (x *run) cleanup(ctx context.Context) (Observation, error) {
	rctx, cancel := x.resolveCtx(ctx)
	defer cancel()
	err := unmark(rctx, x.t.Store, x.req.SessionID, x.req.HandoffID)
	if herr := x.hooks().runAfter(StepCleanup, &err); herr != nil {
		return Observation{}, herr
	}
	x.cleanupErr = err
	return Observation{Signal: SigOK}, nil
}

// unmark deletes the session's marker if it names handoffID.
func unmark(ctx context.Context, st Store, sessionID, handoffID string) error {
	m, rev, err := st.GetMarker(ctx, sessionID)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return nil
	case err != nil:
		return err
	case m.HandoffID != handoffID:
		return nil
	}
	return st.DeleteMarker(ctx, sessionID, rev)
}

// read settles an uncertain or lost write (cause) by a leader read and
// classifies the record. It retries an unreachable store until
// ResolveTimeout; no answer at all is ErrUnresolved.
func (x *run) read(ctx context.Context, cause error) (Observation, error) {
	rctx, cancel := x.resolveCtx(ctx)
	defer cancel()
	s, err := leaderRetry(rctx, x.t.Store, x.req.SessionID)
	reason := ""
	if cause != nil {
		reason = cause.Error()
	}
	switch {
	case errors.Is(err, record.ErrNotFound):
		return Observation{Signal: SigRead, Holder: HolderOther, Reason: reason}, nil
	case err != nil:
		return Observation{}, fmt.Errorf("%w: session %s: leader read (after %v): %w", ErrUnresolved, x.req.SessionID, cause, err)
	}
	h := Classify(x.req, s)
	x.last = s
	if h.held() {
		x.cur = s
	}
	return Observation{Signal: SigRead, Revision: s.Revision, Holder: h, Reason: reason}, nil
}

func (x *run) resolveCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), x.t.ResolveTimeout)
}

// leaderRetry is LeaderSession retried with backoff while the store does
// not answer; not-found and invalid are answers.
func leaderRetry(ctx context.Context, st Store, id string) (record.Session, error) {
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(10*time.Millisecond),
		backoff.WithMaxInterval(500*time.Millisecond), backoff.WithMaxElapsedTime(0))
	return backoff.RetryWithData(func() (record.Session, error) {
		s, err := st.LeaderSession(ctx, id)
		if errors.Is(err, record.ErrNotFound) || errors.Is(err, record.ErrInvalid) {
			return s, backoff.Permanent(err)
		}
		return s, err
	}, backoff.WithContext(b, ctx))
}
