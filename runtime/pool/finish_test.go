package pool

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// quarantinedWithEnd quarantines a session of v1 (an unreadable
// checkpoint), stops the owner that did and writes an operator's end into
// its record, as the admin route does.
func (e *env) quarantinedWithEnd() (string, record.Session) {
	e.t.Helper()
	p := e.owner("v1", "p1", quarantining(1))
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("hello"))
	e.WaitOutput(id, "hello")
	e.Check(p.Stop())
	e.breakCheckpoint(id)
	q := e.owner("v1", "p2", quarantining(1))
	e.Wake("v1", id)
	cur := e.waitQuarantined(id)
	e.Check(q.Stop())
	cur, err := e.Store.RequestFinish(e.t.Context(), cur, record.FinishRequest{Op: record.FinishEnd, By: "admin-1", At: time.Now()})
	e.Check(err)
	return id, cur
}

// An owner asked on the any-owner subject for a session of another
// deployment relays the request to that deployment's pool while one of
// its owners is live: the end is carried out there, once.
func TestFinishRelayedToTheSessionsDeployment(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id, _ := e.quarantinedWithEnd()
	e.owner("v1", "p3")
	other := e.owner("v2", "q1")
	rep := other.Owner.Finish(t.Context(), id, true)
	if rep.Error != nil || rep.Outcome != protocol.FinishEnded || rep.How != familyIndex {
		t.Fatalf("finish = %+v", rep)
	}
	done := e.Record(id).Record
	if !done.Terminated() || done.Finish != nil || done.Writer == "" || done.EventSeqFloor != rep.EventSeq {
		t.Fatalf("record %+v", done)
	}
	evs := e.WaitKind(id, wire.EventSessionEnded, 1)
	e.CheckStream(evs)
	if got := harness.LastData[wire.SessionEndedV4](t, evs, wire.EventSessionEnded); got != (wire.SessionEndedV4{
		Reason: wire.EndTerminated, By: wire.EndedByAdmin}) {
		t.Fatalf("session.ended %+v", got)
	}
	if got := e.finishers(id); len(got) != 1 || got[0] != "p3" {
		t.Fatalf("finish claims by %v, want one by p3 (v1's owner)", got)
	}
	if again := other.Owner.Finish(t.Context(), id, true); again.Error == nil || again.Error.Code != protocol.CodeRefused {
		t.Fatalf("a second finish = %+v, want refused", again)
	}
}

// finishers are the processes whose finish claims the record's history
// holds, in order.
func (e *env) finishers(id string) []string {
	e.t.Helper()
	kv, err := e.JS.KeyValue(e.t.Context(), e.Names.SessionsBucket())
	e.Check(err)
	hist, err := kv.History(e.t.Context(), id)
	e.Check(err)
	var out []string
	for _, h := range hist {
		r, err := record.DecodeSession(h.Value())
		if err == nil && r.FinishPending() && r.OwnerProcess != "" {
			out = append(out, r.OwnerProcess)
		}
	}
	return out
}

// A finisher that claimed the session and died before it finished leaves
// the request in the record, named by its dead process: the next owner's
// sweep finishes it, with one session.ended.
func TestFinishOfADeadFinisherSwept(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id, cur := e.quarantinedWithEnd()
	claimed, err := record.ClaimFinish(cur.Record, "p-dead", "finish-dead")
	e.Check(err)
	_, err = e.Store.UpdateSession(t.Context(), claimed, cur.Revision)
	e.Check(err)
	e.owner("v2", "q1", func(c *Config) { c.SweepInterval = 200 * time.Millisecond })
	done := e.WaitRecord(id, record.SessionRecord.Terminated)
	if done.Record.OwnerProcess != "" || done.Record.Finish != nil {
		t.Fatalf("record %+v", done.Record)
	}
	evs := e.WaitKind(id, wire.EventSessionEnded, 1)
	e.CheckStream(evs)
	if n := harness.Count(evs, wire.EventSessionEnded); n != 1 {
		t.Fatalf("%d session.ended", n)
	}
	if got := e.finishers(id); len(got) != 2 || got[0] != "p-dead" || got[1] != "q1" {
		t.Fatalf("finish claims by %v, want p-dead's then q1's (no owner of v1 runs)", got)
	}
}

// A session whose end was requested while no owner of its deployment ran
// (record.FinishPending on a record its stopped owner left active) is
// never booted: an owner of its deployment that loads it (a claim) or is
// woken for it answers "ended" and ends it as the finisher, outside any
// run — the epoch stays, one session.started, and session.ended
// {terminated, by user, message}.
func TestPendingEndNeverBooted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.owner("v1", "p1")
	var ids []string
	var before []record.Session
	for range 2 {
		id := e.Start("v1").SessionID
		e.Send(id, harness.Deliver("hello"))
		e.WaitOutput(id, "hello")
		ids = append(ids, id)
	}
	e.Check(p.Stop())
	for _, id := range ids {
		cur, err := e.Store.RequestFinish(t.Context(), e.Record(id), record.FinishRequest{Op: record.FinishEnd, By: "user-1",
			At: time.Now(), EndedBy: record.EndedByUser, Message: "bye"})
		e.Check(err)
		if !cur.Record.FinishPending() || cur.Record.State == record.StateQuarantined {
			t.Fatalf("record with the end pending: %+v", cur.Record)
		}
		before = append(before, cur)
	}
	q := e.owner("v1", "p2") // no quarantine index entry: its sweep does not find them
	if loaded, err := q.load(t.Context(), ids[0], runtime.BootRecover, nil, nil); loaded || !errors.Is(err, errEndPending) {
		t.Fatalf("load = %v, %v; want errEndPending", loaded, err)
	}
	if rep := q.Wake(t.Context(), protocol.WakeRequest{SessionID: ids[1], Source: protocol.WakeIngress}); rep.Outcome != protocol.WakeEnded {
		t.Fatalf("wake = %+v, want ended", rep)
	}
	for i, id := range ids {
		evs := e.WaitKind(id, wire.EventSessionEnded, 1)
		e.CheckStream(evs)
		done := e.Record(id).Record
		if !done.Terminated() || done.Epoch != before[i].Record.Epoch || done.Finish != nil {
			t.Fatalf("record after the end: %+v", done)
		}
		if got := harness.LastData[wire.SessionEndedV4](t, evs, wire.EventSessionEnded); got != (wire.SessionEndedV4{
			Reason: wire.EndTerminated, By: wire.EndedByUser, Message: "bye"}) {
			t.Fatalf("session.ended %+v", got)
		}
		if n := harness.Count(evs, wire.EventSessionStarted); n != 1 {
			t.Fatalf("%d session.started: the session was booted", n)
		}
	}
}
