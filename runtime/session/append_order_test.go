package session_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/wire"
)

// gate holds (or fails) the first append of a batch holding turn.started:
// the append of a turn's admission, in flight while the step runs.
type gate struct {
	entered chan struct{} // closed when the held append began
	release chan struct{} // close to let it go on
	fail    error         // returned by the held append instead of appending
	armed   atomic.Bool
	once    sync.Once
}

// open lets the held append go on (once; also at the test's end, so that
// a failed test's session can stop).
func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

func newGate(fail error) *gate {
	g := &gate{entered: make(chan struct{}), release: make(chan struct{}), fail: fail}
	g.armed.Store(true)
	return g
}

type gatedAppender struct {
	session.Appender
	g *gate
}

func (a gatedAppender) AppendAll(ctx context.Context, first uint64, data [][]byte) error {
	if a.g.holds(data) {
		close(a.g.entered)
		<-a.g.release
		if a.g.fail != nil {
			return a.g.fail
		}
	}
	return a.Appender.AppendAll(ctx, first, data)
}

func (g *gate) holds(data [][]byte) bool {
	for _, d := range data {
		if e, err := wire.DecodeEvent(nil, d); err == nil && e.Kind == wire.EventTurnStarted {
			return g.armed.CompareAndSwap(true, false)
		}
	}
	return false
}

// stepped is the echo agent, telling when each step returned.
type stepped struct {
	echo
	done chan struct{}
}

func (a stepped) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	res, err := a.echo.Step(ctx, in)
	a.done <- struct{}{}
	return res, err
}

// gatedRig is a rig whose admission append g holds, and whose agent
// reports each step on the returned channel.
func gatedRig(t *testing.T, g *gate) (*rig, chan struct{}) {
	steps := make(chan struct{}, 8)
	r := newRig(t, func(env *session.Env) {
		inner := env.Appender
		env.Appender = func(id string) session.Appender { return gatedAppender{inner(id), g} }
		env.Agent = stepped{echo{cancelled: make(chan struct{})}, steps}
	})
	return r, steps
}

// admitHeld starts the session and delivers "one": its admission commits,
// the append of its events is held by g, and its step returns.
func admitHeld(t *testing.T, r *rig, g *gate, steps <-chan struct{}) {
	t.Helper()
	r.start()
	t.Cleanup(g.open) // runs before the session's own clean-up
	r.send(deliver("one"))
	wait(t, g.entered, "the admission's append")
	wait(t, steps, "the step")
}

func wait(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// A commit's CAS waits for the previous commit's append: the record never
// drops from its outbox an event the stream does not hold yet, though the
// step runs while the append is in flight.
func TestCommitWaitsForThePreviousAppend(t *testing.T) {
	g := newGate(nil)
	r, steps := gatedRig(t, g)
	admitHeld(t, r, g, steps)
	// The step's result reaches the loop, which must wait for the append
	// before its commit; give it time to do something it must not.
	time.Sleep(100 * time.Millisecond)
	if k := outboxKinds(r.checkpoint()); !slices.Contains(k, wire.EventTurnStarted) {
		t.Fatalf("the record dropped turn.started from its outbox while its append was held: outbox %v", k)
	}
	if slices.Contains(kinds(r.stream()), wire.EventTurnStarted) {
		t.Fatal("turn.started on the stream while its append was held")
	}
	g.open()
	r.eventually("one's output", func() bool { return slices.Equal(r.outputs(), []string{"one"}) })
	r.eventually("the turn completed", func() bool { return slices.Contains(kinds(r.stream()), wire.EventTurnCompleted) })
	if k := kinds(r.stream()); slices.Index(k, wire.EventTurnStarted) > slices.Index(k, wire.EventMessageOutput) {
		t.Fatalf("events out of order: %v", k)
	}
}

// A failed append stops the session before the next commit lands: the
// record keeps the events that did not reach the stream in its outbox, for
// the next owner to publish.
func TestFailedAppendStopsBeforeTheNextCommit(t *testing.T) {
	g := newGate(errors.New("append refused"))
	r, steps := gatedRig(t, g)
	admitHeld(t, r, g, steps)
	admitted := r.record()
	g.open()
	err := r.stopped()
	if err == nil || !strings.Contains(err.Error(), "append refused") {
		t.Fatalf("Run returned %v, want the append's error", err)
	}
	cur := r.record()
	if cur.Revision != admitted.Revision {
		t.Fatalf("a commit landed after the failed append: revision %d, then %d", admitted.Revision, cur.Revision)
	}
	if k := outboxKinds(r.checkpoint()); !slices.Contains(k, wire.EventTurnStarted) {
		t.Fatalf("the record's outbox lost the unpublished turn.started: %v", k)
	}
	if slices.Contains(r.outputs(), "one") {
		t.Fatal("the step's output was published after the failed append")
	}
}

// checkpoint is the checkpoint of the session's record.
func (r *rig) checkpoint() session.Checkpoint {
	r.t.Helper()
	cp, err := session.DecodeCheckpoint(r.record().Record.Checkpoint)
	if err != nil {
		r.t.Fatal(err)
	}
	return cp
}

func outboxKinds(cp session.Checkpoint) []string {
	var out []string
	for _, e := range cp.Outbox {
		out = append(out, e.Kind)
	}
	return out
}
