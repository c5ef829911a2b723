package pool

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/wire"
)

// A long conversation seals its history into object-store segments: the
// record stays small, and a restarted owner reads the whole history back.
func TestHistorySegmentsSurviveRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.owner("v1", "p1")
	id := e.Start("v1").SessionID
	const n = 40
	for i := range n {
		text := fmt.Sprintf("%03d %s", i, strings.Repeat("x", 2000))
		e.Send(id, harness.WithID(fmt.Sprintf("h%d", i), harness.Deliver(text)))
		e.WaitApplied(id, fmt.Sprintf("h%d", i))
	}
	e.WaitKind(id, wire.EventTurnCompleted, n)
	cur, _ := e.session(id)
	cp, err := wire.DecodeCheckpoint(cur.Record.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	if len(cp.HistorySegments) < 2 {
		t.Fatalf("history not sealed into segments: %d segments, %d inline entries", len(cp.HistorySegments), len(cp.History))
	}
	if size := len(cur.Record.Checkpoint); size > wire.MaxInlineBytes {
		t.Fatalf("record checkpoint is %d bytes", size)
	}
	_ = first.Stop()
	second := e.owner("v1", "p1")
	e.Send(id, harness.WithID("after", harness.Deliver("after restart")))
	e.WaitOutput(id, "after restart")
	cur, _ = e.session(id)
	d, err := session.ReadCheckpoint(t.Context(), second.env, id, cur.Record.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	full := d.Snap.History
	if got := len(full); got < 2*n+2 {
		t.Fatalf("history after restart has %d entries, want at least %d", got, 2*n+2)
	}
	if !strings.HasPrefix(full[0].Text(), "000 ") || full[len(full)-1].Text() != "after restart" {
		t.Fatalf("history lost its beginning or end: %q … %q", full[0].Text()[:10], full[len(full)-1].Text())
	}
	e.CheckStream(e.Events(id))
}

// An alias a session asked for but another session holds is never put in
// its consumer's filter, also after a restart.
func TestTakenAliasNotFilteredAfterRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.owner("v1", "p1")
	b := e.Start("v1", "shared").SessionID
	a := e.Start("v1").SessionID
	e.Send(a, harness.WithID("ask", harness.Deliver("/alias shared")))
	e.WaitKind(a, wire.EventTurnCompleted, 1)
	_ = first.Stop()
	e.owner("v1", "p1")
	e.Send(a, harness.WithID("a-live", harness.Deliver("a is live")))
	e.WaitOutput(a, "a is live")
	e.Send("shared", harness.WithID("to-shared", harness.Deliver("for b")))
	e.WaitOutput(b, "for b")
	if evs := e.Events(a); slices.IndexFunc(evs, harness.IsApplied("to-shared")) >= 0 {
		t.Fatalf("session %s consumed a command sent to another session's alias", a)
	}
	if h, ok := e.Hook("shared"); !ok || h.SessionID != b {
		t.Fatalf("hook of shared: %+v %v", h, ok)
	}
}
