package handoff

import (
	"context"
	"errors"
	"fmt"
	"github.com/baton-rt/baton/internal/failpoint"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
)

// ActivateRequest is what a candidate is asked to activate (the body of a
// handoff start request).
type ActivateRequest struct {
	HandoffID        string
	SessionID        string
	ExpectedRevision uint64 // the staged revision
	Target           string // the deployment the request is addressed to
}

// Candidate is the owner process of the target deployment that activates.
type Candidate struct {
	Deployment string // this process's deployment: the request's target must be it
	ProcessID  string // recorded as the record's owner process
	RunID      string // the new owner run (fresh per activation)
	WireV      int    // inbox wire version this owner accepts; 0 keeps the record's
	// Validate checks that this deployment can run the checkpoint (decode,
	// state version, history segments). An error refuses the activation
	// before anything is written, so the source keeps the session.
	Validate func(checkpoint []byte) error
	// BeforeClaim, if set, runs after validation and right before the
	// claim CAS; an error ends the activation before anything is written
	// (a store failure, not a refusal). The driver waits there for its
	// index entry, written concurrently with the reads.
	BeforeClaim func() error
	// Failpoints are the armed fault injection points (tests only; nil
	// arms none): failpoint.HandoffCandidateBefore and After.
	Failpoints *failpoint.Registry
}

// Activation is the result of Activate.
type Activation struct {
	// Session is the record as activated, at its revision. On a replay it
	// is the record as read now (its epoch and run are the current
	// holder's, which differ from the activation's if the session was
	// adopted since).
	Session record.Session
	// Replayed: this handoff had already activated (an earlier request);
	// nothing was written and the caller must not run the session again.
	Replayed bool
	// Predecessor is the source's consumer (<sessionID>-<epoch-1>), which
	// the new owner deletes once its own consumer exists.
	Predecessor string
	// From is the source's deployment and Trigger the trigger the marker
	// names (its CommandID is empty for a marker that did not record it);
	// set only when this request activated the session (not on a replay).
	From    string
	Trigger Trigger
}

// Activate is the candidate side of the handoff: load the record at
// exactly the expected revision (a leader read, so a stale replica never
// causes a refusal), check that it and the marker name this handoff and
// this deployment, validate the checkpoint, then claim by ONE CAS against
// the expected revision: epoch+1, this run, this deployment, state active,
// consumer <sessionID>-<epoch>, outcome completed. That CAS is the handoff.
//
// Errors: ErrRefused (with the reason: ErrStale, ErrWrongTarget,
// ErrNotStaged, ErrUnreadable, ErrInvalid) means nothing was written and
// nothing will be; ErrUncertain means the claim may have landed (see
// docs/handoff.md); ErrInvalid alone is a misconfigured Candidate; any
// other error is a store failure before the claim. Only a nil error with
// Replayed false means: run the session now (runtime.BootHandoff).
func Activate(ctx context.Context, st Store, req ActivateRequest, c Candidate) (Activation, error) {
	if err := c.check(); err != nil {
		return Activation{}, err
	}
	if err := checkRequest(req, c.Deployment); err != nil {
		return Activation{}, err
	}
	a := &activator{st: st, req: req, c: c}
	return a.run(ctx)
}

func (c Candidate) check() error {
	switch {
	case subjects.ValidateDeployment(c.Deployment) != nil:
		return fmt.Errorf("%w: candidate deployment: %w", ErrInvalid, subjects.ValidateDeployment(c.Deployment))
	case c.ProcessID == "" || c.RunID == "":
		return fmt.Errorf("%w: candidate needs a process ID and a run ID", ErrInvalid)
	case c.Validate == nil:
		return fmt.Errorf("%w: candidate needs a checkpoint validator", ErrInvalid)
	}
	return nil
}

func checkRequest(req ActivateRequest, self string) error {
	switch {
	case subjects.ValidateDeployment(req.Target) != nil:
		return refuse(ErrWrongTarget, "%w", subjects.ValidateDeployment(req.Target))
	case req.Target != self:
		return refuse(ErrWrongTarget, "request for %q reached %q", req.Target, self)
	case req.HandoffID == "":
		return refuse(ErrInvalid, "empty handoff ID")
	case subjects.ValidateSessionID(req.SessionID) != nil:
		return refuse(ErrInvalid, "%w", subjects.ValidateSessionID(req.SessionID))
	case req.ExpectedRevision == 0:
		return refuse(ErrInvalid, "expected revision 0")
	}
	return nil
}

func refuse(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %w: "+format, append([]any{ErrRefused, kind}, args...)...)
}

type activator struct {
	st        Store
	req       ActivateRequest
	c         Candidate
	marker    record.Marker // the marker verify read
	markerRev uint64        // its revision
	// markerRead is the leader read of the marker, started together with
	// the record's load: it depends on the request alone.
	markerRead chan markerResult
}

type markerResult struct {
	m   record.Marker
	rev uint64
	err error
}

func (a *activator) run(ctx context.Context) (Activation, error) {
	// The record and the marker are read concurrently, each by a direct
	// get first (answered outside the server's API queue): the request
	// names both the handoff and the staged revision the marker must show,
	// and the source sends the request only after both the stage and the
	// marker exist. The record is the one written at the staged revision,
	// whatever came after (SessionWritten); a marker hint that does not
	// name this handoff is read again from the leader. Neither read is a
	// fence: the claim CAS at the staged revision is, and a marker can only
	// go away after the record left that revision, which that CAS finds.
	a.markerRead = make(chan markerResult, 1)
	go func() {
		m, rev, err := a.st.MarkerHint(ctx, a.req.SessionID)
		if err != nil || !a.names(m) {
			m, rev, err = a.st.GetMarker(ctx, a.req.SessionID)
		}
		a.markerRead <- markerResult{m, rev, err}
	}()
	cur, replay, err := a.load(ctx)
	if err != nil || replay != nil {
		return deref(replay), err
	}
	if err := a.verify(ctx, cur); err != nil {
		return a.movedOn(ctx, err)
	}
	if err := a.validate(cur); err != nil {
		return a.movedOn(ctx, err)
	}
	if a.c.BeforeClaim != nil {
		if err := a.c.BeforeClaim(); err != nil {
			return Activation{}, fmt.Errorf("handoff: activation of %s: %w", a.req.SessionID, err)
		}
	}
	act, err := a.claim(ctx, cur)
	if err != nil || act.Replayed {
		return act, err
	}
	act.From = cur.Record.DeploymentID
	act.Trigger = Trigger{CommandID: a.marker.TriggerCommandID, Seq: a.marker.TriggerSeq}
	return act, a.unmark(ctx)
}

func deref(a *Activation) Activation {
	if a == nil {
		return Activation{}
	}
	return *a
}

// step runs a hook-wrapped step body.
func (a *activator) step(s Step, body func() error) error {
	if err := a.hooks().runBefore(s); err != nil {
		return err
	}
	err := body()
	if herr := a.hooks().runAfter(s, &err); herr != nil {
		return herr
	}
	return err
}

// load reads the record at the expected revision. A newer revision is a
// replay of a completed activation, or a refusal (the record moved on).
func (a *activator) load(ctx context.Context) (record.Session, *Activation, error) {
	var cur record.Session
	err := a.step(StepLoad, func() (err error) {
		cur, err = a.st.SessionWritten(ctx, a.req.SessionID, a.req.ExpectedRevision)
		return err
	})
	switch {
	case err == nil:
		return cur, nil, nil
	case errors.Is(err, record.ErrConflict):
		act, err := a.replay(ctx, err)
		return record.Session{}, &act, err
	case errors.Is(err, record.ErrNotFound):
		return record.Session{}, nil, refuse(ErrNotStaged, "%w", err)
	}
	return record.Session{}, nil, err
}

// replay answers a request whose revision is gone: the same handoff
// already completed → its result, unchanged; anything else → ErrStale.
func (a *activator) replay(ctx context.Context, cause error) (Activation, error) {
	s, err := a.st.LeaderSession(ctx, a.req.SessionID)
	if err != nil {
		return Activation{}, fmt.Errorf("handoff: activation of %s (%v): %w", a.req.SessionID, cause, err)
	}
	if h := s.Record.Handoff; h != nil && h.ID == a.req.HandoffID && h.Outcome == OutcomeCompleted && s.Record.DeploymentID == a.c.Deployment {
		return Activation{Session: s, Replayed: true}, nil
	}
	return Activation{}, refuse(ErrStale, "session %s is at revision %d, expected %d (%v)", a.req.SessionID, s.Revision, a.req.ExpectedRevision, cause)
}

// movedOn answers a refusal of the record load read. That is the record
// as written at the expected revision, which may since have moved on: a
// request answered before and sent again finds its marker removed, say.
// A record no longer at that revision is answered as a replay or ErrStale,
// as a load that saw the newer revision answers it (one leader read, on a
// refusal only); a record still there, or one the read cannot reach, gets
// the refusal.
func (a *activator) movedOn(ctx context.Context, err error) (Activation, error) {
	if !errors.Is(err, ErrRefused) {
		return Activation{}, err
	}
	s, rerr := a.st.LeaderSession(ctx, a.req.SessionID)
	if rerr != nil || s.Revision == a.req.ExpectedRevision {
		return Activation{}, err
	}
	return a.replay(ctx, err)
}

// verify checks that the record and the marker show this handoff, staged
// for this deployment at the expected revision.
func (a *activator) verify(ctx context.Context, cur record.Session) error {
	return a.step(StepVerify, func() error {
		if err := a.verifyRecord(cur.Record); err != nil {
			return err
		}
		return a.verifyMarker(ctx)
	})
}

func (a *activator) verifyRecord(rec record.SessionRecord) error {
	h := rec.Handoff
	switch {
	case rec.State != record.StateHandoff:
		return refuse(ErrNotStaged, "session %s is %s at revision %d", rec.SessionID, rec.State, a.req.ExpectedRevision)
	case h == nil || h.ID != a.req.HandoffID || h.Outcome != OutcomeStaged:
		return refuse(ErrNotStaged, "session %s is staged for another handoff", rec.SessionID)
	case h.Target != a.c.Deployment:
		return refuse(ErrWrongTarget, "session %s is staged for %q", rec.SessionID, h.Target)
	}
	return nil
}

func (a *activator) verifyMarker(ctx context.Context) error {
	var r markerResult
	select {
	case r = <-a.markerRead:
	case <-ctx.Done():
		return ctx.Err()
	}
	m, err := r.m, r.err
	switch {
	case errors.Is(err, record.ErrNotFound):
		return refuse(ErrNotStaged, "session %s has no handoff marker", a.req.SessionID)
	case err != nil:
		return err
	case !a.names(m):
		return refuse(ErrNotStaged, "marker names handoff %q at revision %d", m.HandoffID, m.StagedRevision)
	case m.Target != a.c.Deployment:
		return refuse(ErrWrongTarget, "marker names target %q", m.Target)
	}
	a.marker, a.markerRev = m, r.rev
	return nil
}

// names reports a marker of this request's handoff at its staged revision.
func (a *activator) names(m record.Marker) bool {
	return m.HandoffID == a.req.HandoffID && m.StagedRevision == a.req.ExpectedRevision
}

func (a *activator) validate(cur record.Session) error {
	return a.step(StepValidate, func() error {
		if err := a.c.Validate(cur.Record.Checkpoint); err != nil {
			return refuse(ErrUnreadable, "%w", err)
		}
		return nil
	})
}

// claim is the handoff: one CAS against the expected revision.
func (a *activator) claim(ctx context.Context, cur record.Session) (Activation, error) {
	rec, err := a.activated(cur.Record)
	if err != nil {
		return Activation{}, refuse(ErrNotStaged, "%w", err)
	}
	var rev uint64
	err = a.step(StepActivate, func() (err error) {
		rev, err = a.st.UpdateSession(ctx, rec, cur.Revision)
		return err
	})
	var crash *crashError
	switch {
	case err == nil:
		return Activation{Session: record.Session{Record: rec, Revision: rev}, Predecessor: cur.Record.Consumer}, nil
	case errors.As(err, &crash):
		return Activation{}, err
	}
	return a.settle(ctx, cur, rec, err)
}

func (a *activator) activated(rec record.SessionRecord) (record.SessionRecord, error) {
	o := record.Owner{RunID: a.c.RunID, Deployment: a.c.Deployment, Process: a.c.ProcessID, WireV: a.c.WireV}
	return record.Activate(rec, o, a.marker)
}

// settleAttempts bounds settle's read-and-retry rounds.
const settleAttempts = 4

// settle resolves a claim that conflicted or whose answer was lost. A
// leader read that shows this run's claim means it landed. A record still
// at the expected revision is claimed again by the same CAS — the conflict
// was one a replicated stream reports for a key whose previous write is
// still being applied (MaxStages explains it), or the first write is
// still in flight: if it lands late, the retry conflicts and the next read
// shows it; if the source reclaims meanwhile, the retry conflicts and the
// read shows the source. Never a blind retry: every conflict is followed
// by a read. A record that moved on is a replay or a refusal.
func (a *activator) settle(ctx context.Context, cur record.Session, rec record.SessionRecord, cause error) (Activation, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), DefaultResolveTimeout)
	defer cancel()
	for range settleAttempts {
		s, err := leaderRetry(ctx, a.st, a.req.SessionID)
		switch {
		case err != nil:
			return Activation{}, fmt.Errorf("%w: session %s (%v): %w", ErrUncertain, a.req.SessionID, cause, err)
		case s.Record.OwnerRunID == a.c.RunID && s.Record.Epoch == rec.Epoch:
			return Activation{Session: s, Predecessor: cur.Record.Consumer}, nil
		case s.Revision != cur.Revision:
			return a.replay(ctx, cause)
		}
		rev, err := a.st.UpdateSession(ctx, rec, cur.Revision)
		if err == nil {
			return Activation{Session: record.Session{Record: rec, Revision: rev}, Predecessor: cur.Record.Consumer}, nil
		}
		cause = err
	}
	return Activation{}, fmt.Errorf("%w: session %s: %v", ErrUncertain, a.req.SessionID, cause)
}

// unmark removes the marker after the claim, best effort: a leftover one is
// stale (the record is no longer staged) and Clean removes it. It deletes
// at the revision verify read, which named this handoff (one round trip;
// a conflict means the source's clean-up was first).
func (a *activator) unmark(ctx context.Context) error {
	err := a.step(StepUnmark, func() error {
		_ = a.st.DeleteMarker(ctx, a.req.SessionID, a.markerRev)
		return nil
	})
	var crash *crashError
	if errors.As(err, &crash) {
		return err
	}
	return nil
}
