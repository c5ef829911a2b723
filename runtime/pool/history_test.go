package pool

import (
	"fmt"
	"strings"
	"testing"

	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/wire"
)

// A long conversation seals its history into object-store segments: the
// record stays small, and a restarted owner reads the whole history back.
func TestHistorySegmentsSurviveRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.owner("v1", "p1")
	id := e.start("v1").SessionID
	const n = 40
	for i := range n {
		text := fmt.Sprintf("%03d %s", i, strings.Repeat("x", 2000))
		e.send(id, withID(fmt.Sprintf("h%d", i), deliver(text)))
		e.waitApplied(id, fmt.Sprintf("h%d", i))
	}
	e.waitKind(id, wire.EventTurnCompleted, n)
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
	first.stop()
	second := e.owner("v1", "p1")
	e.send(id, withID("after", deliver("after restart")))
	e.waitOutput(id, "after restart")
	cur, _ = e.session(id)
	d, err := session.ReadCheckpoint(t.Context(), second.env, id, cur.Record.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	full := d.Snap.History
	if got := len(full); got < 2*n+2 {
		t.Fatalf("history after restart has %d entries, want at least %d", got, 2*n+2)
	}
	if !strings.HasPrefix(full[0].Text, "000 ") || full[len(full)-1].Text != "after restart" {
		t.Fatalf("history lost its beginning or end: %q … %q", full[0].Text[:10], full[len(full)-1].Text)
	}
	checkStream(t, e.events(id))
}

// An alias a session asked for but another session holds is never put in
// its consumer's filter, also after a restart.
func TestTakenAliasNotFilteredAfterRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.owner("v1", "p1")
	b := e.start("v1", "shared").SessionID
	a := e.start("v1").SessionID
	e.send(a, withID("ask", deliver("/alias shared")))
	e.waitKind(a, wire.EventTurnCompleted, 1)
	first.stop()
	e.owner("v1", "p1")
	e.send(a, withID("a-live", deliver("a is live")))
	e.waitOutput(a, "a is live")
	e.send("shared", withID("to-shared", deliver("for b")))
	e.waitOutput(b, "for b")
	if evs := e.events(a); index(evs, isApplied("to-shared")) >= 0 {
		t.Fatalf("session %s consumed a command sent to another session's alias", a)
	}
	if h, ok := e.hook("shared"); !ok || h.SessionID != b {
		t.Fatalf("hook of shared: %+v %v", h, ok)
	}
}
