package handoff_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/session/memory"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

func newID(prefix string) string { return fmt.Sprintf("%s%d", prefix, sessionSeq.Add(1)) }

// activeSession creates a session owned by srcRun on blue.
//
// On a three-node cluster created a moment ago the sessions stream may not
// answer its first writes yet ("no response from stream"): such a create
// is tried again, under a new ID (the first may have landed), for up to
// 30 s.
func activeSession(t *testing.T, st testStore, cp []byte) record.Session {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		id := newID("a")
		c := cp
		if c == nil {
			c = checkpoint(t, id, false)
		}
		rec := record.SessionRecord{SessionID: id, OwnerRunID: srcRun, DeploymentID: srcDeployment, Epoch: 1, OwnerProcess: "p-blue",
			State: record.StateActive, Consumer: subjects.Consumer(id, 1), WireV: 1, Writer: srcRun, Checkpoint: c}
		rev, err := st.CreateSession(testCtx(t), rec)
		if err == nil {
			return record.Session{Record: rec, Revision: rev}
		}
		if !errors.Is(err, jetstream.ErrNoStreamResponse) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}

// stageDirect stages a handoff to green the way Txn's stage and mark do,
// and returns what the candidate is asked.
func stageDirect(t *testing.T, st testStore, cp []byte) handoff.ActivateRequest {
	t.Helper()
	s := activeSession(t, st, cp)
	id, hid := s.Record.SessionID, "ho-"+s.Record.SessionID
	rec := s.Record
	rec.State = record.StateHandoff
	rec.Handoff = &record.HandoffOutcome{ID: hid, Target: candDeployment, Outcome: handoff.OutcomeStaged, Step: "stage"}
	rev, err := st.UpdateSession(testCtx(t), rec, s.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateMarker(testCtx(t), record.Marker{HandoffID: hid, SessionID: id, SourceRun: srcRun,
		Target: candDeployment, TriggerSeq: 1, StagedRevision: rev}); err != nil {
		t.Fatal(err)
	}
	return handoff.ActivateRequest{HandoffID: hid, SessionID: id, ExpectedRevision: rev, Target: candDeployment}
}

func greenCandidate(run string) handoff.Candidate {
	return handoff.Candidate{Deployment: candDeployment, ProcessID: "p-green", RunID: run, WireV: 1, Validate: validate}
}

// TestActivateRefusals: each request is refused before anything is
// written; the record stays staged at its revision and a correct request
// then activates.
func TestActivateRefusals(t *testing.T) {
	n := newNATS(t)
	mem := memory.NewRecords()
	cand := greenCandidate("c1")
	for _, c := range []struct {
		name  string
		st    testStore
		cp    func(id string) []byte
		edit  func(r *handoff.ActivateRequest, c *handoff.Candidate)
		wants []error
	}{
		{"request for another deployment", n.st, nil, func(r *handoff.ActivateRequest, _ *handoff.Candidate) { r.Target = "red" },
			[]error{handoff.ErrRefused, handoff.ErrWrongTarget}},
		{"staged for another deployment", n.st, nil, func(r *handoff.ActivateRequest, c *handoff.Candidate) { r.Target, c.Deployment = "red", "red" },
			[]error{handoff.ErrRefused, handoff.ErrWrongTarget}},
		{"latest", n.st, nil, func(r *handoff.ActivateRequest, _ *handoff.Candidate) { r.Target = "latest" },
			[]error{handoff.ErrRefused, handoff.ErrWrongTarget, subjects.ErrBadDeployment}},
		{"empty target", n.st, nil, func(r *handoff.ActivateRequest, _ *handoff.Candidate) { r.Target = "" },
			[]error{handoff.ErrRefused, handoff.ErrWrongTarget, subjects.ErrBadDeployment}},
		{"candidate configured as latest", n.st, nil, func(r *handoff.ActivateRequest, c *handoff.Candidate) { r.Target, c.Deployment = "latest", "latest" },
			[]error{handoff.ErrInvalid}},
		{"unreadable checkpoint", n.st, func(id string) []byte { return checkpoint(t, id, true) }, nil,
			[]error{handoff.ErrRefused, handoff.ErrUnreadable, wire.ErrUnsupportedState}},
		{"older revision", n.st, nil, func(r *handoff.ActivateRequest, _ *handoff.Candidate) { r.ExpectedRevision-- },
			[]error{handoff.ErrRefused, handoff.ErrStale}},
		{"newer revision", mem, nil, func(r *handoff.ActivateRequest, _ *handoff.Candidate) { r.ExpectedRevision += 100 },
			[]error{handoff.ErrRefused, handoff.ErrNotStaged}},
		{"another handoff", n.st, nil, func(r *handoff.ActivateRequest, _ *handoff.Candidate) { r.HandoffID = "other" },
			[]error{handoff.ErrRefused, handoff.ErrNotStaged}},
		{"zero revision", n.st, nil, func(r *handoff.ActivateRequest, _ *handoff.Candidate) { r.ExpectedRevision = 0 },
			[]error{handoff.ErrRefused, handoff.ErrInvalid}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var cp []byte
			if c.cp != nil {
				cp = c.cp("x")
			}
			req, cc := stageDirect(t, c.st, cp), cand
			good := req
			if c.edit != nil {
				c.edit(&req, &cc)
			}
			before, _ := c.st.LeaderSession(testCtx(t), req.SessionID)
			_, err := handoff.Activate(testCtx(t), c.st, req, cc)
			for _, want := range c.wants {
				if !errors.Is(err, want) {
					t.Fatalf("error %v does not match %v", err, want)
				}
			}
			after, _ := c.st.LeaderSession(testCtx(t), req.SessionID)
			if after.Revision != before.Revision || after.Record.State != record.StateHandoff {
				t.Fatalf("refusal wrote: revision %d → %d, state %s", before.Revision, after.Revision, after.Record.State)
			}
			if c.cp == nil {
				if _, err := handoff.Activate(testCtx(t), c.st, good, cand); err != nil {
					t.Fatalf("the right request after the refusal: %v", err)
				}
			}
		})
	}
}

// TestActivateNotStaged: an active record, or a staged one without its
// marker, is refused.
func TestActivateNotStaged(t *testing.T) {
	st := newNATS(t).st
	s := activeSession(t, st, nil)
	_, err := handoff.Activate(testCtx(t), st, handoff.ActivateRequest{HandoffID: "h", SessionID: s.Record.SessionID,
		ExpectedRevision: s.Revision, Target: candDeployment}, greenCandidate("c1"))
	if !errors.Is(err, handoff.ErrNotStaged) {
		t.Fatalf("active record: %v", err)
	}
	req := stageDirect(t, st, nil)
	_, mrev, err := st.GetMarker(testCtx(t), req.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMarker(testCtx(t), req.SessionID, mrev); err != nil {
		t.Fatal(err)
	}
	if _, err := handoff.Activate(testCtx(t), st, req, greenCandidate("c1")); !errors.Is(err, handoff.ErrNotStaged) {
		t.Fatalf("no marker: %v", err)
	}
}

// TestActivateReplay: the same handoff ID activates once; a repeat returns
// the recorded result without writing, also after the new owner
// committed; the reply says so.
func TestActivateReplay(t *testing.T) {
	st := newNATS(t).st
	req := stageDirect(t, st, nil)
	first, err := handoff.Activate(testCtx(t), st, req, greenCandidate("c1"))
	if err != nil || first.Replayed {
		t.Fatalf("activate: %+v %v", first, err)
	}
	rec := first.Session.Record
	if rec.Epoch != 2 || rec.OwnerRunID != "c1" || rec.DeploymentID != candDeployment || rec.OwnerProcess != "p-green" ||
		rec.State != record.StateActive || rec.Consumer != subjects.Consumer(req.SessionID, 2) || rec.Writer != "c1" ||
		rec.Handoff == nil || rec.Handoff.ID != req.HandoffID || rec.Handoff.Outcome != handoff.OutcomeCompleted {
		t.Fatalf("activated record %+v", rec)
	}
	if first.Predecessor != subjects.Consumer(req.SessionID, 1) {
		t.Fatalf("predecessor consumer %q", first.Predecessor)
	}
	if _, _, err := st.GetMarker(testCtx(t), req.SessionID); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("marker after activation: %v", err)
	}
	again := replay(t, st, req, first.Session.Revision)
	if again.Session.Record.OwnerRunID != "c1" || again.Session.Record.Epoch != 2 {
		t.Fatalf("replay %+v", again.Session.Record)
	}
	// The new owner commits; a replay still answers the same activation.
	rec.WriteCounter++
	rev, err := st.UpdateSession(testCtx(t), rec, first.Session.Revision)
	if err != nil {
		t.Fatal(err)
	}
	again = replay(t, st, req, rev)
	r := handoff.Reply(protocol.HandoffStart{DeploymentID: candDeployment, HandoffID: req.HandoffID, SessionID: req.SessionID}, again, nil)
	if !r.Activated || !r.Replayed || r.Epoch != 2 || r.OwnerRunID != "c1" || r.DeploymentID != candDeployment {
		t.Fatalf("reply %+v", r)
	}
}

func replay(t *testing.T, st testStore, req handoff.ActivateRequest, rev uint64) handoff.Activation {
	t.Helper()
	a, err := handoff.Activate(testCtx(t), st, req, greenCandidate("c2"))
	if err != nil || !a.Replayed {
		t.Fatalf("replay: %+v %v", a, err)
	}
	if cur, _ := st.LeaderSession(testCtx(t), req.SessionID); cur.Revision != rev || a.Session.Revision != rev {
		t.Fatalf("replay wrote: revision %d, want %d", cur.Revision, rev)
	}
	return a
}

// TestActivateAfterReclaim: a candidate that loads after the source
// reclaimed is refused as stale, and a replay of a reclaimed handoff is
// not mistaken for a completed one.
func TestActivateAfterReclaim(t *testing.T) {
	st := newNATS(t).st
	req := stageDirect(t, st, nil)
	cur, err := st.SessionAt(testCtx(t), req.SessionID, req.ExpectedRevision)
	if err != nil {
		t.Fatal(err)
	}
	rec := cur.Record
	rec.State, rec.Handoff.Outcome = record.StateActive, handoff.OutcomeFailed
	if _, err := st.UpdateSession(testCtx(t), rec, cur.Revision); err != nil {
		t.Fatal(err)
	}
	if _, err := handoff.Activate(testCtx(t), st, req, greenCandidate("c1")); !errors.Is(err, handoff.ErrStale) {
		t.Fatalf("after reclaim: %v", err)
	}
}

// TestResolve: mid-handoff is alive, never "no session".
func TestResolve(t *testing.T) {
	st := newNATS(t).st
	ctx := testCtx(t)
	get := func(id string) handoff.Status {
		s, err := handoff.Resolve(ctx, st, id)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := get("nobody"); s.Found || s.Alive || s.MidHandoff {
		t.Fatalf("unknown session: %+v", s)
	}
	active := activeSession(t, st, nil)
	if s := get(active.Record.SessionID); !s.Found || !s.Alive || s.MidHandoff || s.Ended {
		t.Fatalf("active: %+v", s)
	}
	req := stageDirect(t, st, nil)
	if s := get(req.SessionID); !s.Alive || !s.MidHandoff || s.Marker == nil || s.Marker.HandoffID != req.HandoffID {
		t.Fatalf("staged: %+v", s)
	}
	orphan := newID("o")
	if _, err := st.CreateMarker(ctx, record.Marker{HandoffID: "h", SessionID: orphan, Target: candDeployment}); err != nil {
		t.Fatal(err)
	}
	if s := get(orphan); !s.Found || !s.Alive || !s.MidHandoff {
		t.Fatalf("marker without a record: %+v", s)
	}
	rec := active.Record
	rec.State = record.StateEnded
	if _, err := st.UpdateSession(ctx, rec, active.Revision); err != nil {
		t.Fatal(err)
	}
	if s := get(active.Record.SessionID); !s.Found || s.Alive || !s.Ended {
		t.Fatalf("ended: %+v", s)
	}
}

// TestClean: a marker whose handoff is over is removed; a live one stays.
func TestClean(t *testing.T) {
	st := newNATS(t).st
	ctx := testCtx(t)
	req := stageDirect(t, st, nil)
	if removed, err := handoff.Clean(ctx, st, req.SessionID); err != nil || removed {
		t.Fatalf("live marker: removed=%v %v", removed, err)
	}
	cur, _ := st.LeaderSession(ctx, req.SessionID)
	rec := record.Adopt(cur.Record)
	rec.Epoch++
	rec.OwnerRunID = adoptRun
	if rec.State != record.StateActive || rec.Handoff.Outcome != handoff.OutcomeFailed || rec.Handoff.Step != "recover" {
		t.Fatalf("adopted record %+v", rec)
	}
	if _, err := st.UpdateSession(ctx, rec, cur.Revision); err != nil {
		t.Fatal(err)
	}
	if removed, err := handoff.Clean(ctx, st, req.SessionID); err != nil || !removed {
		t.Fatalf("stale marker: removed=%v %v", removed, err)
	}
	if removed, err := handoff.Clean(ctx, st, req.SessionID); err != nil || removed {
		t.Fatalf("no marker: removed=%v %v", removed, err)
	}
	if _, err := handoff.Activate(ctx, st, req, greenCandidate("c1")); !errors.Is(err, handoff.ErrStale) {
		t.Fatalf("activation after adoption: %v", err)
	}
}

// TestStartReply: a handoff start request as Activate takes it, and the
// code each activation error is answered with.
func TestStartReply(t *testing.T) {
	req := protocol.HandoffStart{DeploymentID: "green", HandoffID: "h1", SessionID: "s1", ExpectedRevision: 7}
	if got := handoff.ActivateRequestFrom(req); got != (handoff.ActivateRequest{HandoffID: "h1", SessionID: "s1", ExpectedRevision: 7, Target: "green"}) {
		t.Fatalf("activate request %+v", got)
	}
	_, malformed := protocol.DecodeHandoffStart([]byte(`{"handoffId":"h1","extra":1}`))
	for err, code := range map[error]protocol.Code{
		fmt.Errorf("%w: %w", handoff.ErrRefused, handoff.ErrStale): protocol.CodeRefused,
		handoff.ErrUncertain:     protocol.CodeUncertain,
		handoff.ErrInvalid:       protocol.CodeBadRequest,
		malformed:                protocol.CodeBadRequest,
		context.DeadlineExceeded: protocol.CodeUnavailable,
	} {
		if r := handoff.Reply(req, handoff.Activation{}, err); r.Activated || r.Error == nil || r.Error.Code != code || r.HandoffID != "h1" {
			t.Errorf("%v: reply %+v", err, r)
		}
	}
}

// TestReplyRefusesMalformed: a body that does not decode strictly is
// answered bad_request (as an owner's start responder answers it).
func TestReplyRefusesMalformed(t *testing.T) {
	req, err := protocol.DecodeHandoffStart([]byte(`{"handoffId":"h1","aliases":["x"]}`))
	if !errors.Is(err, protocol.ErrMalformed) {
		t.Fatalf("decode: %v", err)
	}
	reply := handoff.Reply(req, handoff.Activation{}, err)
	if reply.Error == nil || reply.Error.Code != protocol.CodeBadRequest || reply.Activated {
		t.Fatalf("%+v", reply)
	}
	wrapped := handoff.Reply(req, handoff.Activation{}, fmt.Errorf("%w: %w", handoff.ErrInvalid, err))
	if wrapped.Error == nil || wrapped.Error.Code != protocol.CodeBadRequest {
		t.Fatalf("%+v", wrapped)
	}
}

// TestRunRefusesInvalid: requests the transaction refuses before writing.
func TestRunRefusesInvalid(t *testing.T) {
	mem := memory.NewRecords()
	s := activeSession(t, mem, nil)
	base := handoff.Request{HandoffID: "h", SessionID: s.Record.SessionID, SourceRun: srcRun, Source: srcDeployment,
		Target: candDeployment, Trigger: handoff.Trigger{CommandID: "c", Seq: 1}, Tokens: []string{s.Record.SessionID}, Record: s}
	txn := handoff.Txn{Store: mem, Starter: starterFunc(nil), Backlog: newMemInbox()}
	for name, edit := range map[string]func(r *handoff.Request){
		"latest":         func(r *handoff.Request) { r.Target = "latest" },
		"empty target":   func(r *handoff.Request) { r.Target = "" },
		"same":           func(r *handoff.Request) { r.Target = srcDeployment },
		"no handoff ID":  func(r *handoff.Request) { r.HandoffID = "" },
		"no trigger":     func(r *handoff.Request) { r.Trigger.Seq = 0 },
		"no tokens":      func(r *handoff.Request) { r.Tokens = nil },
		"bad token":      func(r *handoff.Request) { r.Tokens = []string{"a.b"} },
		"not the holder": func(r *handoff.Request) { r.SourceRun = "other" },
		"not active":     func(r *handoff.Request) { r.Record.Record.State = record.StatePaused },
	} {
		req := base
		edit(&req)
		res, err := txn.Run(testCtx(t), req)
		if !errors.Is(err, handoff.ErrInvalid) || res.Outcome != handoff.Kept || res.Session.Revision != req.Record.Revision {
			t.Errorf("%s: %+v %v", name, res, err)
		}
	}
	if cur, _ := mem.LeaderSession(testCtx(t), s.Record.SessionID); cur.Revision != s.Revision {
		t.Fatal("an invalid request wrote")
	}
}

type starterFunc func(ctx context.Context, req protocol.HandoffStart) (protocol.HandoffStartReply, error)

func (f starterFunc) Start(ctx context.Context, req protocol.HandoffStart) (protocol.HandoffStartReply, error) {
	return f(ctx, req)
}
