package pool

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// A flood of commands between two boundaries never breaks a commit: each
// boundary admits what fits its budget (docs/runtime.md R3) and leaves the
// rest queued, in order, for the next one.

// floodSize is the flood of these tests: the full 2,000 of the report, also
// in make test (it takes a few seconds).
var floodSize = testsize.Pick(2000, 2000)

// floodWait bounds the wait for a flood to drain: about 5 s alone under
// -race, over a minute under two make test runs at once (some 4,000
// events appended one at a time). A bound, not a measure: nothing checks
// how long it took.
const floodWait = 5 * time.Minute

// TestPauseResumeFlood: 2,000 pause/resume commands posted while a
// /sleep 10s step runs are all applied, once each and in inbox order; no
// commit is refused for its size, the session keeps its epoch and counts
// no boot attempt, and the next delivery is answered.
func TestPauseResumeFlood(t *testing.T) {
	t.Parallel()
	e, logs := floodEnv(t)
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("/sleep 10s"))
	e.WaitKind(id, wire.EventTurnStarted, 1)
	before := e.Record(id).Record

	ids := make([]string, floodSize)
	for i := range ids {
		kind := wire.KindPause
		if i%2 == 1 {
			kind = wire.KindResume // the flood ends resumed
		}
		ids[i] = fmt.Sprintf("f%04d", i)
		e.Send(id, harness.WithID(ids[i], harness.Control(kind)))
	}
	e.checkFlood(id, logs, before.Epoch, ids, "")
}

// TestSteerFlood: 2,000 steering deliveries posted while a /sleep 10s step
// runs all join turns, once each and in inbox order, with the same
// guarantees; each is answered.
func TestSteerFlood(t *testing.T) {
	t.Parallel()
	e, logs := floodEnv(t)
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("/sleep 10s"))
	e.WaitKind(id, wire.EventTurnStarted, 1)
	before := e.Record(id).Record

	ids := make([]string, floodSize)
	for i := range ids {
		ids[i] = fmt.Sprintf("s%04d", i)
		e.Send(id, harness.WithID(ids[i], harness.Steer("steer "+ids[i])))
	}
	evs := e.checkFlood(id, logs, before.Epoch, ids, "")
	outs := harness.Outputs(evs)
	for _, s := range ids {
		if !slices.Contains(outs, "steer "+s) {
			t.Fatalf("steer %s never answered", s)
		}
	}
}

// TestCancelInFlood: a cancel sent three quarters into a pause/resume flood
// reaches the running step at once and is applied at the next boundary —
// in the commit that records the interrupted step — even when that
// boundary leaves earlier commands of the flood for later ones.
func TestCancelInFlood(t *testing.T) {
	t.Parallel()
	e, logs := floodEnv(t)
	id := e.Start("v1").SessionID
	// A step long enough that the cancel always finds it running, however
	// slow the publishing: the cancel ends it.
	e.Send(id, harness.Deliver("/sleep 120s"))
	e.WaitKind(id, wire.EventTurnStarted, 1)
	before := e.Record(id).Record

	// Three quarters of the flood are queued behind the running step when
	// the cancel interrupts it: the cancel's boundary finds that backlog
	// before it, more than one boundary admits.
	ids := make([]string, floodSize)
	for i := range ids {
		c := harness.Control(wire.KindPause)
		switch {
		case i == len(ids)*3/4:
			c = harness.Control(wire.KindCancel)
		case i%2 == 1:
			c.Kind = wire.KindResume
		}
		ids[i] = fmt.Sprintf("f%04d", i)
		e.Send(id, harness.WithID(ids[i], c))
	}
	cancelID := ids[len(ids)*3/4]
	evs := e.checkFlood(id, logs, before.Epoch, ids, cancelID)

	// The commit that applies the cancel is the one that records the
	// interrupted step: its events carry one time stamp.
	at, ok := harness.Find(evs, harness.IsKind(wire.EventStepInterrupted))
	if !ok {
		t.Fatalf("no step.interrupted: %s", harness.Kinds(evs))
	}
	applied, _ := harness.Find(evs, harness.IsApplied(cancelID))
	cancelled, _ := harness.Find(evs, harness.IsKind(wire.EventTurnCancelled))
	if !applied.Time.Equal(at.Time) || !cancelled.Time.Equal(at.Time) {
		t.Fatalf("cancel applied at %s (turn.cancelled at %s), the interrupted step's boundary committed at %s",
			applied.Time, cancelled.Time, at.Time)
	}
}

// TestAppliedSetBoundedWhilePaused: a paused session with a queued
// delivery applies 800 pause commands, each above that delivery in the
// inbox: the record keeps at most wire.MaxAppliedAbove of them (plus what
// one commit adds), the others are deleted from the inbox; after resume
// the delivery is answered and every command was applied once, in order.
func TestAppliedSetBoundedWhilePaused(t *testing.T) {
	t.Parallel()
	e, logs := floodEnv(t)
	id := e.Start("v1").SessionID
	e.Send(id, harness.WithID("p", harness.Control(wire.KindPause)))
	e.WaitKind(id, wire.EventSessionPaused, 1)
	before := e.Record(id).Record
	e.Send(id, harness.WithID("waiting", harness.Deliver("waiting for resume")))
	ids := make([]string, 800)
	seqs := make([]uint64, len(ids))
	for i := range ids {
		ids[i] = fmt.Sprintf("p%04d", i)
		seqs[i] = e.Send(id, harness.WithID(ids[i], harness.Control(wire.KindPause)))
	}
	// 800 commands one after another: the wait is for progress, not for
	// the whole chain (a loaded machine ran it past a minute).
	e.Progressing(wait, "the pauses applied", len(ids), func() int {
		_, snap := e.session(id)
		for i := len(ids) - 1; i >= 0; i-- {
			if snap.Applied.HasID(ids[i]) {
				return i + 1
			}
		}
		return 0
	})
	_, snap := e.session(id)
	if n := len(snap.Applied.Above); n > wire.MaxAppliedAbove+1 {
		t.Fatalf("the record keeps %d applied sequences above the waiting delivery (bound %d)", n, wire.MaxAppliedAbove)
	}
	stream, err := e.JS.Stream(t.Context(), e.Names.InboxStream())
	e.Check(err)
	if _, err := stream.GetMsg(t.Context(), seqs[0]); !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("the first applied pause (seq %d) is still in the inbox: %v", seqs[0], err)
	}
	e.Send(id, harness.WithID("resume", harness.Control(wire.KindResume)))
	evs := e.WaitOutput(id, "waiting for resume")
	applied := e.CheckStream(evs)
	got := harness.CommandIDs(applied)
	want := append(append([]string{"p"}, ids...), "resume", "waiting")
	if !slices.Equal(got, want) {
		t.Fatalf("applied %d commands, want %d in order (p, p0000..p0799, resume, waiting)", len(got), len(want))
	}
	rec := e.Record(id).Record
	if rec.Epoch != before.Epoch || rec.BootAttempts != 0 || logs.has("session stopped") {
		t.Fatalf("epoch %d → %d, bootAttempts %d: the session rebooted", before.Epoch, rec.Epoch, rec.BootAttempts)
	}
}

// floodEnv is an env with one owner whose logs the test also keeps.
func floodEnv(t *testing.T) (*env, *logBuffer) {
	e := newEnv(t)
	logs := &logBuffer{}
	e.owner("v1", "p1", func(c *Config) {
		c.Log = slog.New(slog.NewTextHandler(logs.tee(harness.Writer{TB: t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	return e, logs
}

// checkFlood waits until every flood command is applied (failing at once
// if a commit is refused for its size), then checks: each applied once, in
// inbox order (the cancel, if any, may apply ahead of earlier ones); no
// commit refused; the epoch unchanged and no boot attempt counted; a
// delivery after the flood is answered. It returns the stream.
func (e *env) checkFlood(id string, logs *logBuffer, epoch uint64, ids []string, cancelID string) []wire.Event {
	e.t.Helper()
	e.t.Logf("%s flood of %d sent", time.Now().Format(time.StampMilli), len(ids))
	last := ids[len(ids)-1]
	e.Eventually(floodWait, "the flood applied", func() bool {
		if logs.has("too large") {
			return true
		}
		_, snap := e.session(id)
		return snap.Applied.HasID(last) && snap.Turn == nil
	})
	if l := logs.line("too large"); l != "" {
		e.t.Fatalf("a commit was refused for its size: %s", l)
	}
	e.t.Logf("%s flood applied", time.Now().Format(time.StampMilli))
	e.Send(id, harness.WithID("after", harness.Deliver("after the flood")))
	evs := e.WaitOutput(id, "after the flood")
	applied := e.CheckStream(evs)
	seqs := harness.ByID(applied)
	var prev uint64
	for _, c := range ids {
		s, ok := seqs[c]
		switch {
		case !ok:
			e.t.Fatalf("command %s never applied", c)
		case c == cancelID:
			continue
		case s <= prev:
			e.t.Fatalf("command %s (seq %d) applied after seq %d", c, s, prev)
		}
		prev = s
	}
	order := harness.CommandIDs(applied)
	if i, j := slices.Index(order, ids[0]), slices.Index(order, last); cancelID == "" && j-i != len(ids)-1 {
		e.t.Fatalf("the flood's command.applied events are not in order: %d apart", j-i)
	}
	rec := e.Record(id).Record
	if rec.Epoch != epoch || rec.BootAttempts != 0 {
		e.t.Fatalf("epoch %d → %d, bootAttempts %d: the session rebooted", epoch, rec.Epoch, rec.BootAttempts)
	}
	if l := logs.line("session stopped"); l != "" {
		e.t.Fatalf("the session stopped: %s", l)
	}
	return evs
}

// logBuffer keeps every log line an owner writes.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) tee(w harness.Writer) *teeWriter { return &teeWriter{b: b, w: w} }

func (b *logBuffer) has(s string) bool { return b.line(s) != "" }

// line returns the first line that contains s.
func (b *logBuffer) line(s string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, l := range b.lines {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

type teeWriter struct {
	b *logBuffer
	w harness.Writer
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.b.mu.Lock()
	t.b.lines = append(t.b.lines, string(p))
	t.b.mu.Unlock()
	return t.w.Write(p)
}
