package handoff_test

import (
	"errors"
	"testing"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/internal/natstest"
)

// TestActivateReadsByDirectGet: an activation reads the staged record and
// its marker by direct gets — no leader read (STREAM.MSG.GET, counted on a
// second connection) on the way to its claim. A marker hint that names
// another handoff is read again from the leader, and the refusal it leads
// to is checked against the leader's record (still at the staged
// revision: the refusal stands).
func TestActivateReadsByDirectGet(t *testing.T) {
	t.Parallel()
	n := newNATS(t)
	reads := natstest.CountRequests(t, n.url, "$JS.API.STREAM.MSG.GET.>", nil)
	req := stageDirect(t, n.st, nil)
	before := reads.Count(t)
	act, err := handoff.Activate(testCtx(t), n.st, req, greenCandidate("c1"))
	if err != nil || act.Replayed || act.Session.Record.OwnerRunID != "c1" {
		t.Fatalf("activate: %+v %v", act, err)
	}
	if got := reads.Count(t) - before; got != 0 {
		t.Fatalf("activation: %d leader reads, want 0", got)
	}

	req = stageDirect(t, n.st, nil)
	m, rev, err := n.st.GetMarker(testCtx(t), req.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.st.DeleteMarker(testCtx(t), req.SessionID, rev); err != nil {
		t.Fatal(err)
	}
	m.HandoffID = "another"
	if _, err := n.st.CreateMarker(testCtx(t), m); err != nil {
		t.Fatal(err)
	}
	before = reads.Count(t)
	_, err = handoff.Activate(testCtx(t), n.st, req, greenCandidate("c2"))
	if !errors.Is(err, handoff.ErrNotStaged) {
		t.Fatalf("a marker of another handoff: %v, want ErrNotStaged", err)
	}
	if got := reads.Count(t) - before; got != 2 {
		t.Fatalf("a marker of another handoff: %d leader reads, want 2 (the marker, the record)", got)
	}
	if cur, err := n.st.LeaderSession(testCtx(t), req.SessionID); err != nil || cur.Revision != req.ExpectedRevision {
		t.Fatalf("the refused record moved: %d %v", cur.Revision, err)
	}
}
