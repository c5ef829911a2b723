package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/baton-rt/baton/internal/failpoint"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/runtime/session/memory"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/oklog/ulid/v2"
)

// rig is one session on the in-memory ports: no server, no process.
type rig struct {
	t       *testing.T
	env     *session.Env
	records *memory.Records
	inbox   *memory.Inbox
	events  *memory.Events
	host    *memory.Host
	id      string
	s       *session.Session
	done    chan error
	n       atomic.Int64
}

// echo answers each delivery with its text; a delivery "block" runs until
// its step is cancelled, and reports that it was.
type echo struct{ cancelled chan struct{} }

func (echo) EventKinds() []string { return nil }

func (a echo) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	text := ""
	if len(in.Inputs) > 0 {
		text = in.Inputs[len(in.Inputs)-1].Text
	}
	if text == "block" {
		<-ctx.Done()
		close(a.cancelled)
		return runtime.StepResult{}, ctx.Err()
	}
	data, _ := json.Marshal(wire.MessageOutput{Text: text})
	return runtime.StepResult{Outcome: runtime.OutcomeDone, Events: []runtime.Event{{Kind: wire.EventMessageOutput, Data: data}}}, nil
}

func newRig(t *testing.T, mutate ...func(*session.Env)) *rig {
	t.Helper()
	r := &rig{t: t, records: memory.NewRecords(), inbox: memory.NewInbox(), events: memory.NewEvents(), host: memory.NewHost(),
		id: ulid.Make().String(), done: make(chan error, 1)}
	t.Cleanup(r.host.Close)
	r.env = &session.Env{
		Records: r.records, Inbox: r.inbox, Blobs: memory.NewBlobs(), Timers: memory.NewTimers(), Backlog: r.inbox,
		Process: r.host, Handoffs: r.host, Tasks: r.host, Sends: r.host, Appender: r.events.Appender, Agent: echo{cancelled: make(chan struct{})},
		Deployment: "v1", TickInterval: 10 * time.Millisecond, HibernateAfter: -1,
	}
	for _, m := range mutate {
		m(r.env)
	}
	if err := r.env.Ready(); err != nil {
		t.Fatal(err)
	}
	return r
}

// start creates the session's record and runs it (runtime.BootNew).
func (r *rig) start() {
	r.t.Helper()
	r.create()
	ctx, cancel := context.WithCancel(context.Background())
	r.t.Cleanup(func() { cancel(); <-r.done })
	go func() { r.done <- r.s.Run(ctx, runtime.BootNew) }()
}

// create creates the session's record and its Session (not yet running).
func (r *rig) create() {
	r.t.Helper()
	cp, err := session.EncodeNew(r.id, nil, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	rec, err := record.New(r.id, record.Owner{RunID: ulid.Make().String(), Deployment: "v1", Process: "p1", WireV: wire.CurrentVersion}, cp)
	if err != nil {
		r.t.Fatal(err)
	}
	rev, err := r.records.CreateSession(context.Background(), rec)
	if err != nil {
		r.t.Fatal(err)
	}
	r.s, err = session.New(r.env, session.Boot{Record: rec, Revision: rev, Checkpoint: session.NewCheckpoint(nil, nil),
		Tokens: []string{subjects.StableToken(r.id)}})
	if err != nil {
		r.t.Fatal(err)
	}
}

// send publishes a command to the session's stable address.
func (r *rig) send(c wire.Command) uint64 {
	r.t.Helper()
	if c.ID == "" {
		c.ID = fmt.Sprintf("c%d", r.n.Add(1))
	}
	c.V, c.AcceptedAt = wire.CurrentVersion, time.Now().UTC()
	if c.AcceptedDeploymentID == "" {
		c.AcceptedDeploymentID = "v1"
	}
	data, err := wire.Encode(wire.Current(), c)
	if err != nil {
		r.t.Fatal(err)
	}
	return r.inbox.Publish(subjects.StableToken(r.id), data)
}

func deliver(text string) wire.Command {
	return wire.Command{Kind: wire.KindDeliver, Deliver: &wire.Deliver{Mode: wire.ModeQueue, Payloads: []wire.Payload{{Message: wire.TextMessage(text)}}}}
}

// stream is the session's published events.
func (r *rig) stream() []wire.Event {
	r.t.Helper()
	var out []wire.Event
	for i, data := range r.events.Stream(r.id) {
		e, err := wire.DecodeEvent(nil, data)
		if err != nil || e.Seq != uint64(i+1) {
			r.t.Fatalf("event %d: seq %d, %v", i+1, e.Seq, err)
		}
		out = append(out, e)
	}
	return out
}

// outputs are the message.output texts published.
func (r *rig) outputs() []string {
	var out []string
	for _, e := range r.stream() {
		if e.Kind == wire.EventMessageOutput {
			var d wire.MessageOutput
			_ = json.Unmarshal(e.Data, &d)
			out = append(out, d.Text)
		}
	}
	return out
}

// eventually polls cond until it holds, or fails the test after a deadline
// generous for a loaded machine.
func (r *rig) eventually(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// stopped waits for Run to return and reports its error.
func (r *rig) stopped() error {
	r.t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		return err
	case <-time.After(20 * time.Second):
		r.t.Fatal("the session did not stop")
		return nil
	}
}

func (r *rig) record() record.Session {
	cur, err := r.records.LeaderSession(context.Background(), r.id)
	if err != nil {
		r.t.Fatal(err)
	}
	return cur
}

func kinds(evs []wire.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Kind)
	}
	return out
}

func TestRunsADelivery(t *testing.T) {
	r := newRig(t)
	r.start()
	r.send(deliver("hello"))
	r.eventually("hello's output", func() bool { return slices.Equal(r.outputs(), []string{"hello"}) })
	r.eventually("the turn completed", func() bool { return slices.Contains(kinds(r.stream()), wire.EventTurnCompleted) })
}

// A commit that loses its CAS stops the session at once: the step's events
// are never published, and nothing else is written.
func TestCommitConflictStopsWithNothingPublished(t *testing.T) {
	r := newRig(t)
	r.start()
	r.send(deliver("one"))
	r.eventually("one's output", func() bool { return slices.Contains(r.outputs(), "one") })
	r.eventually("the turn completed", func() bool { return slices.Contains(kinds(r.stream()), wire.EventTurnCompleted) })
	published, before := len(r.stream()), r.record()
	r.records.BeforeUpdate = func(record.SessionRecord, uint64) error { return record.ErrConflict }
	r.send(deliver("two"))
	if err := r.stopped(); err != nil {
		t.Fatalf("a lost CAS is not a failure of the session: %v", err)
	}
	if n := len(r.stream()); n != published {
		t.Fatalf("%d events published after the conflict: %v", n-published, kinds(r.stream()[published:]))
	}
	if after := r.record(); after.Revision != before.Revision {
		t.Fatalf("the record moved from %d to %d", before.Revision, after.Revision)
	}
	if r.s.Ended() != "" || r.s.Hibernated() {
		t.Fatalf("ended %q, hibernated %v", r.s.Ended(), r.s.Hibernated())
	}
}

// A commit whose reply is lost is settled by a leader read: it landed, so
// the session goes on and publishes the step's events exactly once.
func TestUncertainCommitSettledByLeaderRead(t *testing.T) {
	r := newRig(t)
	var lost atomic.Bool
	r.records.AfterUpdate = func(rec record.SessionRecord, _ uint64) error {
		if rec.WriteCounter > 1 && lost.CompareAndSwap(false, true) {
			return errors.New("reply lost")
		}
		return nil
	}
	r.start()
	r.send(deliver("one"))
	r.eventually("a lost reply", lost.Load)
	r.send(deliver("two"))
	r.eventually("both outputs", func() bool { return slices.Equal(r.outputs(), []string{"one", "two"}) })
	r.eventually("two turns completed", func() bool {
		return slices.Equal(slices.DeleteFunc(kinds(r.stream()), func(k string) bool { return k != wire.EventTurnCompleted }),
			[]string{wire.EventTurnCompleted, wire.EventTurnCompleted})
	})
	select {
	case err := <-r.done:
		t.Fatalf("the session stopped: %v", err)
	default:
	}
}

// A cursor that ends while the record still names this run is re-opened
// at the lowest unapplied sequence: nothing processed runs again, nothing
// after it is skipped.
func TestCursorLossReopensAtAppliedNext(t *testing.T) {
	r := newRig(t)
	r.start()
	r.send(deliver("one"))
	r.eventually("one's output", func() bool { return slices.Equal(r.outputs(), []string{"one"}) })
	cursor := r.record().Record.Consumer
	if err := r.inbox.Delete(context.Background(), cursor); err != nil {
		t.Fatal(err)
	}
	r.eventually("the cursor re-opened", func() bool { return r.inbox.Opened(cursor) == 2 })
	r.send(deliver("two"))
	r.eventually("two's output", func() bool { return slices.Contains(r.outputs(), "two") })
	if got := r.outputs(); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("outputs %v: a processed command ran again, or one was skipped", got)
	}
}

// A cursor lost to a successor (the record names another run) stops the
// session without a write.
func TestCursorLossToASuccessorStops(t *testing.T) {
	r := newRig(t)
	r.start()
	r.send(deliver("one"))
	r.eventually("one's output", func() bool { return slices.Equal(r.outputs(), []string{"one"}) })
	r.eventually("the commit settled", func() bool { return !session.InFlight(snapshotOf(t, r.record())) })
	cur := r.record()
	next, err := record.Claim(cur.Record, record.Owner{RunID: "successor", Deployment: "v1", Process: "p2"}, record.Boot{Settled: record.StateActive, At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := r.records.UpdateSession(context.Background(), next, cur.Revision)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.inbox.Delete(context.Background(), cur.Record.Consumer); err != nil {
		t.Fatal(err)
	}
	if err := r.stopped(); err != nil {
		t.Fatal(err)
	}
	if got := r.record(); got.Revision != rev {
		t.Fatalf("the stale run wrote the record: revision %d, want %d", got.Revision, rev)
	}
}

func snapshotOf(t *testing.T, cur record.Session) runtime.Snapshot {
	t.Helper()
	d, err := session.DecodeCheckpoint(cur.Record.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	return d.Snap
}

// A command published after the cursor was deleted, while the hibernating
// session is still in memory, reaches neither the cursor nor a wake: the
// re-check after the session left finds it. Without it, the re-check finds
// nothing.
func TestHibernationRecheckFindsALateCommand(t *testing.T) {
	for _, late := range []bool{true, false} {
		t.Run(fmt.Sprintf("late=%v", late), func(t *testing.T) {
			var r *rig
			r = newRig(t, func(env *session.Env) {
				env.HibernateAfter = 20 * time.Millisecond
				env.Failpoints = failpoint.New().On(failpoint.Hibernating, failpoint.Do(func(a failpoint.Args) {
					if late && a.Detail == "consumer" {
						r.send(deliver("late"))
					}
				}))
			})
			r.start()
			r.send(deliver("one"))
			if err := r.stopped(); err != nil {
				t.Fatal(err)
			}
			if !r.s.Hibernated() || r.record().Record.State != record.StateHibernated {
				t.Fatalf("not hibernated: %v, record %s", r.s.Hibernated(), r.record().Record.State)
			}
			again, err := r.s.Recheck(context.Background())
			if err != nil || again != late {
				t.Fatalf("re-check: %v, %v; want %v", again, err, late)
			}
			if !slices.Contains(r.host.Removed(), r.id) {
				t.Fatal("the index entry of the hibernated session stays")
			}
		})
	}
}

// A session whose cursor has not yet delivered a command in its inbox is
// not quiet, even when its machine is idle: it is neither hibernated when
// idle nor when the loaded-session cap asks. (Under load, a session woken
// for a command was evicted by the cap before its cursor delivered it, was
// woken again, evicted again, and never ran the command.)
func TestNoHibernationWithACommandUndelivered(t *testing.T) {
	r := newRig(t, func(env *session.Env) { env.HibernateAfter = 20 * time.Millisecond })
	r.start()
	r.eventually("the boot commit", func() bool { return len(r.stream()) > 0 })
	r.inbox.Hold(true)
	r.send(deliver("one"))
	deadline := time.Now().Add(500 * time.Millisecond) // many hibernation periods and cap requests
	for time.Now().Before(deadline) {
		r.s.Activity().AskHibernate()
		if st := r.record().Record.State; st == record.StateHibernated {
			t.Fatal("hibernated with an undelivered command in its inbox")
		}
		time.Sleep(5 * time.Millisecond)
	}
	r.inbox.Hold(false)
	r.eventually("one's output", func() bool { return slices.Equal(r.outputs(), []string{"one"}) })
	if err := r.stopped(); err != nil || !r.s.Hibernated() {
		t.Fatalf("not hibernated once quiet: %v", err)
	}
}

// A cancel command cancels the step in flight: the agent's context ends,
// the turn ends cancelled, and the session goes on.
func TestStepCancelledMidRun(t *testing.T) {
	r := newRig(t)
	r.start()
	r.send(deliver("block"))
	r.eventually("the step running", func() bool { return slices.Contains(kinds(r.stream()), wire.EventTurnStarted) })
	r.send(wire.Command{Kind: wire.KindCancel})
	select {
	case <-r.env.Agent.(echo).cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the step's context was not cancelled")
	}
	r.eventually("turn.cancelled", func() bool { return slices.Contains(kinds(r.stream()), wire.EventTurnCancelled) })
	r.send(deliver("after"))
	r.eventually("the next turn's output", func() bool { return slices.Contains(r.outputs(), "after") })
}

// An idle session that sees a delivery accepted by another deployment hands
// the decision to the host's handoff transaction with the trigger, the
// tokens and the record; moved, it stops without a write and leaves the
// process's index.
func TestHandoffTriggerHandedToHost(t *testing.T) {
	r := newRig(t)
	r.host.OnHandoff = func(_ context.Context, req handoff.Request) (handoff.Result, error) {
		return handoff.Result{Outcome: handoff.Moved, Session: req.Record}, nil
	}
	r.start()
	r.send(deliver("one"))
	r.eventually("one's output", func() bool { return slices.Equal(r.outputs(), []string{"one"}) })
	c := deliver("upgrade")
	c.AcceptedDeploymentID = "v2"
	seq := r.send(c)
	if err := r.stopped(); err != nil {
		t.Fatal(err)
	}
	reqs := r.host.Handoffs()
	if len(reqs) != 1 {
		t.Fatalf("%d handoff requests", len(reqs))
	}
	req := reqs[0]
	if req.Target != "v2" || req.Source != "v1" || req.Trigger.Seq != seq || req.SessionID != r.id ||
		!slices.Equal(req.Tokens, []string{subjects.StableToken(r.id)}) || req.Record.Revision != r.record().Revision {
		t.Fatalf("handoff request %+v", req)
	}
	if slices.Contains(r.outputs(), "upgrade") {
		t.Fatal("the trigger was processed by the source")
	}
	if !slices.Contains(r.host.Removed(), r.id) {
		t.Fatal("the index entry stays after the move")
	}
}
