package pool

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/failpoint"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
)

// heldAppend arms failpoint.BeforeAppend to hold the first append of the
// target session's events (once a target is set) until release is closed,
// then to return what fail says.
type heldAppend struct {
	target  atomic.Pointer[string]
	first   atomic.Uint64 // the held batch's first event seq
	held    chan struct{}
	release chan struct{}
	once    sync.Once
	letOnce sync.Once
	fail    error
}

func newHeldAppend() *heldAppend {
	return &heldAppend{held: make(chan struct{}), release: make(chan struct{})}
}

// let lets the held append go on (once).
func (h *heldAppend) let() { h.letOnce.Do(func() { close(h.release) }) }

func (h *heldAppend) arm(c *Config) {
	c.Failpoints = failpoint.New().On(failpoint.BeforeAppend, func(a failpoint.Args) error {
		id := h.target.Load()
		if id == nil || *id != a.SessionID {
			return nil
		}
		mine := false
		h.once.Do(func() {
			mine = true
			seq, _ := strconv.ParseUint(a.Detail, 10, 64)
			h.first.Store(seq)
			close(h.held)
		})
		if !mine {
			return nil
		}
		<-h.release
		return h.fail
	})
}

// heldTurn sends "two" to a session that answered "one", with the append of
// the admission's events held, and waits until the turn's last commit has
// landed all the same: its checkpoint's outbox carries the held events
// before its own. It returns the held batch's first seq.
func (e *env) heldTurn(h *heldAppend, id string) uint64 {
	e.t.Helper()
	h.target.Store(&id)
	e.Send(id, harness.WithID("two", harness.Deliver("two")))
	select {
	case <-h.held:
	case <-time.After(wait):
		e.t.Fatal("the admission's events were never appended")
	}
	first := h.first.Load()
	var cp wire.Checkpoint
	e.Eventually(wait, "the turn's last commit landed while its first events were held", func() bool {
		cp = e.checkpointOf(id)
		return slices.Contains(harness.Outputs(cp.Outbox), "two")
	})
	if len(cp.Outbox) == 0 || cp.Outbox[0].Seq != first {
		e.t.Fatalf("the outbox begins at %v, want the held events from seq %d carried", harness.Kinds(cp.Outbox), first)
	}
	if evs := e.Events(id); len(evs) == 0 || evs[len(evs)-1].Seq != first-1 {
		e.t.Fatalf("the stream holds %s, want every event before seq %d and none after", harness.Kinds(evs), first)
	}
	return first
}

// A commit does not wait for the append of the commit before it: the
// events of that append (held here) ride in its own outbox, before its
// own events. Once the held append goes on, the stream holds every event
// once, in order, and the turn's output.
func TestCommitCarriesEventsInFlight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := newHeldAppend()
	defer h.let() // a failed test does not leave the append held (before the owner stops)
	e.owner("v1", "p1", h.arm)
	id := e.Start("v1").SessionID
	e.answered(id, "one", 1)
	e.heldTurn(h, id)
	h.let()
	evs := e.WaitOutput(id, "two")
	e.CheckStream(evs)
	if got := harness.Outputs(evs); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("outputs %q", got)
	}
	e.wantRuns(id, "t2/1", 1)
}

// The carried events survive their append's failure: the run stops (the
// failed append is noticed at its next tick), the session restarts from
// the record, whose outbox holds them, and the next run appends what the
// stream lacks. Nothing is lost or appended twice, and the committed step
// does not run again.
func TestCarriedEventsSurviveAFailedAppend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	h := newHeldAppend()
	defer h.let() // a failed test does not leave the append held (before the owner stops)
	h.fail = errors.New("fault: append refused")
	e.owner("v1", "p1", h.arm)
	id := e.Start("v1").SessionID
	e.answered(id, "one", 1)
	run := e.Record(id).Record.OwnerRunID
	e.heldTurn(h, id)
	h.let()
	evs := e.WaitOutput(id, "two")
	e.CheckStream(evs)
	if got := harness.Outputs(evs); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("outputs %q", got)
	}
	if cur := e.Record(id).Record; cur.OwnerRunID == run {
		t.Fatalf("the run whose append failed still runs the session (run %s)", run)
	}
	e.wantRuns(id, "t2/1", 1)
	e.answered(id, "three", 3)
}
