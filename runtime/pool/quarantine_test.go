package pool

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/wire"
	"github.com/prometheus/client_golang/prometheus"
)

// quarantining sets the quarantine threshold and backoff of an owner.
func quarantining(after int, backoff ...time.Duration) func(*Config) {
	return func(c *Config) {
		c.QuarantineAfter, c.QuarantineBackoff = after, append([]time.Duration{}, backoff...)
	}
}

// breakCheckpoint writes a checkpoint of a state version no build reads
// straight into the session's record, by CAS, as a newer build's write
// looks to this one. It returns the checkpoint it replaced.
func (e *env) breakCheckpoint(id string) []byte {
	e.t.Helper()
	cur := e.Record(id)
	orig := cur.Record.Checkpoint
	rec := cur.Record
	rec.Checkpoint = withStateV(e.t, orig, 99)
	if _, err := e.Store.UpdateSession(e.t.Context(), rec, cur.Revision); err != nil {
		e.t.Fatal(err)
	}
	return orig
}

func withStateV(t *testing.T, cp []byte, v int) []byte {
	t.Helper()
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(cp, &doc); err != nil {
		t.Fatal(err)
	}
	doc["stateV"] = json.RawMessage(strconv.Itoa(v))
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitQuarantined waits until the record says quarantined and returns it.
func (e *env) waitQuarantined(id string) record.Session {
	e.t.Helper()
	return e.WaitRecord(id, record.SessionRecord.Quarantined)
}

// notRunning: no owner runs the session, the record is still the
// quarantined one (no write at all since), no consumer at any epoch up to
// the next.
func notRunning(t *testing.T, e *env, id string, q record.Session, owners ...*owner) {
	t.Helper()
	for _, o := range owners {
		if o.IsLoaded(id) {
			t.Fatalf("%s runs the quarantined session", o.cfg.ProcessID)
		}
	}
	cur, err := e.Store.LeaderSession(t.Context(), id)
	if err != nil || cur.Revision != q.Revision || !cur.Record.Quarantined() {
		t.Fatalf("record written since the quarantine (rev %d → %d): %+v %v", q.Revision, cur.Revision, cur.Record, err)
	}
	for ep := uint64(1); ep <= q.Record.Epoch+1; ep++ {
		if name := id + "-" + strconv.FormatUint(ep, 10); e.ConsumerExists(name) {
			t.Fatalf("consumer %s exists for a quarantined session", name)
		}
	}
}

// A session whose checkpoint no build reads is quarantined on its first
// counted attempt here (QuarantineAfter 1), and then no boot path boots
// it: a wake, the inbox sweeper (a delivery sits in its inbox), the orphan
// sweeper, a lease takeover, the resume of an index, adoption by another
// deployment once its own is retired, a handoff activation, a direct
// claim. None of them writes the record; the delivery stays in the inbox.
func TestNoBootPathBootsQuarantined(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	p1 := e.owner("v1", "p1", hibernating(100*time.Millisecond, 0), quarantining(1), func(c *Config) { c.Registerer = reg })
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("hello"))
	e.WaitOutput(id, "hello")
	e.waitHibernated(id)
	e.breakCheckpoint(id)
	kept := e.Send(id, harness.WithID("kept", harness.Deliver("kept")))
	e.Wake("v1", id)
	q := e.waitQuarantined(id)
	if q.Record.Quarantine.Attempts != 1 || q.Record.OwnerProcess != "" || q.Record.Quarantine.DeploymentID != "v1" {
		t.Fatalf("quarantine %+v", q.Record)
	}
	evs := e.WaitKind(id, wire.EventSessionQuarantined, 1)
	e.CheckStream(evs)
	if last := evs[len(evs)-1]; last.Kind != wire.EventSessionQuarantined || last.Seq != q.Record.EventSeqFloor {
		t.Fatalf("last event %+v, floor %d", last, q.Record.EventSeqFloor)
	}
	ctx := t.Context()

	if rep := p1.Wake(ctx, protocol.WakeRequest{SessionID: id, Source: protocol.WakeIngress}); rep.Outcome != protocol.WakeQuarantined {
		t.Fatalf("wake: %+v", rep)
	}
	if woken, err := p1.sweeps.sweepInbox(ctx); err != nil || slices.Contains(woken, id) {
		t.Fatalf("inbox sweep woke %v (%v)", woken, err)
	}
	p1.sweeps.sweep(ctx)
	if got := gather(t, reg); got["baton_owner_sessions_quarantined"] != 1 || got[`baton_owner_wakes_total{outcome="quarantined",source="ingress"}`] < 1 {
		t.Fatalf("metrics: quarantined %v, wakes answered quarantined %v", got["baton_owner_sessions_quarantined"],
			got[`baton_owner_wakes_total{outcome="quarantined",source="ingress"}`])
	}
	if err := e.Store.AddIndex(ctx, "ghost", id); err != nil {
		t.Fatal(err)
	}
	p1.adoption.adopt(ctx, "ghost", nil) // the lease key of a dead process: taken over, its index woken
	if ids, _ := e.Store.ListIndex(ctx, "ghost"); slices.Contains(ids, id) {
		t.Fatalf("takeover left the index entry of the quarantined session: %v", ids)
	}
	if err := e.Store.AddIndex(ctx, "p1", id); err != nil {
		t.Fatal(err)
	}
	if err := p1.resumes.resumeIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if ids, _ := e.Store.ListIndex(ctx, "p1"); slices.Contains(ids, id) {
		t.Fatalf("resume left the index entry of the quarantined session: %v", ids)
	}
	if ok, err := p1.load(ctx, id, runtime.BootRecover, nil, nil); ok || !errors.Is(err, ErrQuarantined) {
		t.Fatalf("direct claim: %v %v", ok, err)
	}
	notRunning(t, e, id, q, p1)

	if _, _, err := e.Store.RetireDeployment(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	p2 := e.owner("v2", "p2", hibernating(time.Hour, 0))
	if rep := p2.Wake(ctx, protocol.WakeRequest{SessionID: id, Source: protocol.WakeIngress}); rep.Outcome != protocol.WakeQuarantined {
		t.Fatalf("adoption by v2: %+v", rep)
	}
	if woken, err := p2.sweeps.sweepInbox(ctx); err != nil || slices.Contains(woken, id) {
		t.Fatalf("v2's inbox sweep woke %v (%v)", woken, err)
	}
	if rep := e.handoffStart("v2", id, q.Revision); rep.Activated || rep.Error == nil {
		t.Fatalf("handoff activation: %+v", rep)
	}
	notRunning(t, e, id, q, p1, p2)
	if seq, err := session.Unprocessed(ctx, p1.backlog, []string{id}, runtime.Applied{Next: kept}); err != nil || seq != kept {
		t.Fatalf("the delivery made meanwhile is not in the inbox: %d %v", seq, err)
	}
}

// handoffStart sends a handoff start for the session at rev to deployment
// dep, as a source would, and returns the candidate's reply.
func (e *env) handoffStart(dep, id string, rev uint64) protocol.HandoffStartReply {
	e.t.Helper()
	data, _ := json.Marshal(protocol.HandoffStart{DeploymentID: dep, HandoffID: "h-" + id, SessionID: id, ExpectedRevision: rev})
	msg, err := e.NC.Request(e.Names.Start(dep), data, 10*time.Second)
	if err != nil {
		e.t.Fatal(err)
	}
	var rep protocol.HandoffStartReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		e.t.Fatal(err)
	}
	return rep
}

// A process that dies with a step in flight counts one boot attempt for
// that session (its claimant vanished mid-step); its settled neighbours —
// idle, or parked on an input — count none. Once the re-run step commits
// the turn, the counter is back to 0.
func TestBootAttemptsResetOnProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p1 := e.owner("v1", "p1")
	busy, idle, asking := e.Start("v1").SessionID, e.Start("v1").SessionID, e.Start("v1").SessionID
	e.Send(idle, harness.Deliver("hi"))
	e.WaitOutput(idle, "hi")
	e.Send(asking, harness.Deliver("/ask name?"))
	e.WaitKind(asking, wire.EventInputRequested, 1)
	e.owner("v1", "p2")
	e.Send(busy, harness.Deliver("/sleep 1500ms"))
	e.Eventually(wait, "the sleep step running on p1", func() bool { return slices.Contains(e.stepRuns(busy), "t1/1 p1") })
	_ = p1.Stop() // gone mid-step

	var during record.SessionRecord
	e.Eventually(wait, "p2 re-running the step", func() bool {
		cur, _ := e.session(busy)
		during = cur.Record
		return during.OwnerProcess == "p2" && slices.Contains(e.stepRuns(busy), "t1/1 p2")
	})
	if during.BootAttempts != 1 || during.LastBootError != "" {
		t.Fatalf("the claim of the interrupted session counted %d attempts (%q), want 1", during.BootAttempts, during.LastBootError)
	}
	for _, id := range []string{idle, asking} {
		e.Eventually(wait, "p2 owning "+id, func() bool { cur, _ := e.session(id); return cur.Record.OwnerProcess == "p2" })
		if cur, _ := e.session(id); cur.Record.BootAttempts != 0 {
			t.Fatalf("settled neighbour %s counted %d attempts", id, cur.Record.BootAttempts)
		}
	}
	evs := e.WaitKind(busy, wire.EventTurnCompleted, 1)
	e.CheckStream(evs)
	e.Eventually(wait, "the counter reset by the settled commit", func() bool {
		cur, _ := e.session(busy)
		return cur.Record.BootAttempts == 0 && cur.Record.BootAttemptAt.IsZero()
	})
}

// Owners that vanish with the same session's step in flight, again and
// again: the claim that reaches QuarantineAfter (2 here) parks the session
// instead of running the step a third time, with error process_died, and
// session.quarantined follows every committed event.
func TestQuarantineAfterDeaths(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	q := quarantining(2, 50*time.Millisecond)
	p1 := e.owner("v1", "p1", q)
	id := e.Start("v1").SessionID
	p2 := e.owner("v1", "p2", q)
	e.Send(id, harness.Deliver("/sleep 30s"))
	e.Eventually(wait, "the step on p1", func() bool { return slices.Contains(e.stepRuns(id), "t1/1 p1") })
	_ = p1.Stop()
	e.Eventually(wait, "the step on p2", func() bool { return slices.Contains(e.stepRuns(id), "t1/1 p2") })
	p3 := e.owner("v1", "p3", q)
	_ = p2.Stop()
	cur := e.waitQuarantined(id)
	if q := cur.Record.Quarantine; q.Attempts != 2 || q.Error != record.ProcessDied {
		t.Fatalf("quarantine %+v", q)
	}
	if runs := e.stepRuns(id); len(runs) != 2 {
		t.Fatalf("the step ran %v, want on p1 and p2 only", runs)
	}
	evs := e.WaitKind(id, wire.EventSessionQuarantined, 1)
	e.CheckStream(evs)
	d := harness.FirstData[wire.SessionQuarantined](t, evs, wire.EventSessionQuarantined)
	if d.Attempts != 2 || d.Error != record.ProcessDied || d.DeploymentID != "v1" || evs[len(evs)-1].Kind != wire.EventSessionQuarantined {
		t.Fatalf("session.quarantined %+v; events %v", d, harness.Kinds(evs))
	}
	notRunning(t, e, id, cur, p3)
}
