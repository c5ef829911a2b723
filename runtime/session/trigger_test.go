package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/runtime/session/memory"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// runSuccessor runs the rig's session as a handoff's successor whose
// marker named the trigger at seq with command ID id.
func (r *rig) runSuccessor(seq uint64, id string) {
	r.t.Helper()
	r.create()
	var err error
	r.s, err = session.New(r.env, session.Boot{Record: r.record().Record, Revision: r.record().Revision,
		Checkpoint: session.NewCheckpoint(nil, nil), Tokens: []string{subjects.StableToken(r.id)},
		Arrival: &runtime.HandoffInfo{ID: "h1", From: "v0", Epoch: 1, Trigger: runtime.Ref{Seq: seq, ID: id}}})
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.t.Cleanup(func() { cancel(); <-r.done })
	go func() { r.done <- r.s.Run(ctx, runtime.BootHandoff) }()
}

// applied counts the command.applied events of command id.
func applied(evs []wire.Event, id string) int {
	n := 0
	for _, e := range evs {
		var d wire.CommandApplied
		if e.Kind == wire.EventCommandApplied && json.Unmarshal(e.Data, &d) == nil && d.CommandID == id {
			n++
		}
	}
	return n
}

// A handoff's successor reads its trigger by its sequence and admits it in
// its boot commit without waiting for its cursor, which here delivers
// nothing (a held inbox: a consumer still being created, or slow to
// deliver). Once the cursor delivers, the trigger again is a duplicate the
// machine ignores, and the next command is processed.
func TestSuccessorReadsItsTrigger(t *testing.T) {
	r := newRig(t)
	seq := r.send(deliver("trigger"))
	r.inbox.Hold(true)
	r.runSuccessor(seq, "c1")
	r.eventually("the trigger's step, the cursor holding everything", func() bool {
		return slices.Contains(r.outputs(), "trigger")
	})
	evs := r.stream()
	completed := slices.IndexFunc(evs, func(e wire.Event) bool { return e.Kind == wire.EventHandoffCompleted })
	admitted := slices.IndexFunc(evs, func(e wire.Event) bool { return e.Kind == wire.EventCommandApplied })
	if completed < 0 || admitted < completed {
		t.Fatalf("handoff.completed at %d, the trigger applied at %d: %v", completed, admitted, kinds(evs))
	}
	r.inbox.Hold(false)
	r.send(deliver("next"))
	r.eventually("the next command's step", func() bool { return slices.Contains(r.outputs(), "next") })
	evs = r.stream()
	if n := applied(evs, "c1"); n != 1 {
		t.Fatalf("the trigger applied %d times: %v", n, kinds(evs))
	}
	if got := r.outputs(); !slices.Equal(got, []string{"trigger", "next"}) {
		t.Fatalf("outputs %q", got)
	}
}

// A trigger that cannot be read (the marker's sequence holds another
// session's message) is left to the cursor, as for any other run: it is
// applied once, when the cursor delivers it.
func TestSuccessorTriggerUnreadableLeftToTheCursor(t *testing.T) {
	r := newRig(t)
	other := r.inbox.Publish(subjects.StableToken("someone-else"), []byte("{}"))
	r.send(deliver("trigger"))
	r.runSuccessor(other, "c1")
	r.eventually("the trigger's step", func() bool { return slices.Contains(r.outputs(), "trigger") })
	if n := applied(r.stream(), "c1"); n != 1 {
		t.Fatalf("the trigger applied %d times: %v", n, kinds(r.stream()))
	}
}

// failingOpen is the memory inbox whose next Open calls fail (a consumer
// creation the server refuses).
type failingOpen struct {
	*memory.Inbox
	fail atomic.Int32
}

func (f *failingOpen) Open(ctx context.Context, c session.Cursor) (session.Reader, error) {
	if f.fail.Add(-1) >= 0 {
		return nil, errors.New("fault: the consumer's creation failed")
	}
	return f.Inbox.Open(ctx, c)
}

// A successor that read its trigger commits its boot with it before its
// consumer exists; when the consumer's creation then fails, the run stops
// with that error after the commit, before the trigger's step. The run
// that recovers the session runs the step: the trigger is applied once and
// answered once.
func TestSuccessorCursorFailsAfterItsBootCommit(t *testing.T) {
	var inbox *failingOpen
	r := newRig(t, func(e *session.Env) {
		inbox = &failingOpen{Inbox: e.Inbox.(*memory.Inbox)}
		inbox.fail.Store(1)
		e.Inbox = inbox
	})
	seq := r.send(deliver("trigger"))
	r.runSuccessor(seq, "c1")
	if err := r.stopped(); err == nil || !strings.Contains(err.Error(), "consumer's creation failed") {
		t.Fatalf("the run stopped with %v", err)
	}
	evs := r.stream()
	if n := applied(evs, "c1"); n != 1 || len(r.outputs()) != 0 {
		t.Fatalf("after the failed run: trigger applied %d times, outputs %q: %v", n, r.outputs(), kinds(evs))
	}
	r.reboot(t)
	r.eventually("the recovered run's step", func() bool { return slices.Contains(r.outputs(), "trigger") })
	if n := applied(r.stream(), "c1"); n != 1 || len(r.outputs()) != 1 {
		t.Fatalf("after recovery: trigger applied %d times, outputs %q", n, r.outputs())
	}
}
