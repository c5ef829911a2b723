package ingress_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/wire"
)

// endSession sends POST /v1/sessions/{id}/end and expects 202.
func (e *env) endSession(id, body string) ingress.Receipt {
	e.t.Helper()
	code, b := e.post("/v1/sessions/"+id+"/end", body)
	if code != http.StatusAccepted {
		e.t.Fatalf("end %s %s = %d %s, want 202", id, body, code, b)
	}
	var rc ingress.Receipt
	if err := json.Unmarshal(b, &rc); err != nil {
		e.t.Fatal(err)
	}
	return rc
}

// ended waits for the session's one session.ended and returns its data
// (data version 4: reason, by, message) and the stream.
func (e *env) ended(id string) (wire.SessionEndedV4, wire.Event, []wire.Event) {
	e.t.Helper()
	e.waitEvents(id, "session.ended", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventSessionEnded) >= 1 })
	time.Sleep(300 * time.Millisecond) // a second session.ended would be on the stream by now
	evs := e.waitEvents(id, "the stream", func([]wire.Event) bool { return true })
	contiguous(e.t, evs, 0)
	if n := harness.Count(evs, wire.EventSessionEnded); n != 1 {
		e.t.Fatalf("%d session.ended events, want 1: %v", n, kindsOf(evs))
	}
	last := evs[len(evs)-1]
	if last.Kind != wire.EventSessionEnded {
		e.t.Fatalf("the last event is %s, not session.ended: %v", last.Kind, kindsOf(evs))
	}
	var d wire.SessionEndedV4
	if err := json.Unmarshal(last.Data, &d); err != nil {
		e.t.Fatalf("session.ended data %s: %v", last.Data, err)
	}
	return d, last, evs
}

// TestEndDuringStep: the user's end of a session whose step runs cancels
// the step (rolled back: step.interrupted), cancels the turn and ends the
// session with session.ended {terminated, by user, message} at data
// version 4 — the owner applies it in its own run (same epoch, never
// fenced). Later deliveries and a later end get 410 gone; other methods
// on the route 405.
func TestEndDuringStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"end.step","text":"/sleep 1h"}`).SessionID
	e.waitEvents(id, "the step running", func(evs []wire.Event) bool { return harness.Count(evs, "turn.started") == 1 })
	before := e.leader(id).Record
	rc := e.endSession(id, `{"message":"thanks, all done","caller":"slack:U1"}`)
	if rc.SessionID != id || rc.Seq == 0 {
		t.Fatalf("receipt %+v", rc)
	}
	d, last, evs := e.ended(id)
	if d.Reason != wire.EndTerminated || d.By != wire.EndedByUser || d.Message != "thanks, all done" || last.V != 4 {
		t.Fatalf("session.ended v%d %s, want v4 {terminated, by user, message}", last.V, last.Data)
	}
	for _, k := range []string{"step.interrupted", "turn.cancelled"} {
		if harness.Count(evs, k) != 1 {
			t.Fatalf("no %s before the end: %v", k, kindsOf(evs))
		}
	}
	if harness.Count(evs, "turn.completed") != 0 || harness.Count(evs, "message.output") != 0 {
		t.Fatalf("the cancelled step's work was kept: %v", kindsOf(evs))
	}
	// The running owner applied it in its run: never fenced, no other
	// claim (an ended record may be claimed again later, for its clean-up).
	e.waitState(id, record.StateEnded)
	if last.OwnerRunID != before.OwnerRunID {
		t.Fatalf("session.ended written by run %s, want the running owner's %s", last.OwnerRunID, before.OwnerRunID)
	}
	if v := e.stateV(id); v != wire.EndStateVersion {
		t.Fatalf("the ended checkpoint is at state version %d, want %d", v, wire.EndStateVersion)
	}
	if st := e.status(id); st.State != string(record.StateEnded) {
		t.Fatalf("status after the end: %+v", st)
	}
	checkError(t, e, http.MethodPost, "/v1/deliveries", `{"alias":"end.step","text":"again"}`, testToken, http.StatusGone, "gone")
	checkError(t, e, http.MethodPost, "/v1/sessions/"+id+"/end", ``, testToken, http.StatusGone, "gone")
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		code, hdr, b := e.callHeader(m, "/v1/sessions/"+id+"/end", ``, testToken)
		if code != http.StatusMethodNotAllowed || hdr.Get("Allow") != "POST" {
			t.Fatalf("%s /end = %d Allow %q %s, want 405 Allow POST", m, code, hdr.Get("Allow"), b)
		}
	}
}

// TestEndDuringInputWait: an end while the session waits for its user's
// answer cancels the wait and the turn; the answer sent afterwards is 410.
func TestEndDuringInputWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"end.ask","text":"/ask your name?"}`).SessionID
	e.waitEvents(id, "the input request", func(evs []wire.Event) bool { return harness.Count(evs, "input.requested") == 1 })
	e.endSession(id, ``)
	d, last, evs := e.ended(id)
	if d.Reason != wire.EndTerminated || d.By != wire.EndedByUser || d.Message != "" || last.V != 4 {
		t.Fatalf("session.ended v%d %s, want v4 {terminated, by user}", last.V, last.Data)
	}
	if harness.Count(evs, "turn.cancelled") != 1 {
		t.Fatalf("the waiting turn was not cancelled: %v", kindsOf(evs))
	}
	checkError(t, e, http.MethodPost, "/v1/sessions/"+id+"/input", `{"requestId":"x","value":"Ada"}`, testToken, http.StatusGone, "gone")
}

// TestEndWithChildren: a parent's end ends its two children (each with
// reason closed) and the parent with terminated.
func TestEndWithChildren(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"end.parent","text":"/spawnbg kid1 /ask first?"}`).SessionID
	e.deliver(`{"alias":"end.parent","text":"/spawnbg kid2 /ask second?"}`)
	var kids []string
	e.waitEvents(id, "two children", func(evs []wire.Event) bool {
		kids = kids[:0]
		for _, ev := range evs {
			if ev.Kind == "child.started" {
				var c struct {
					ChildSessionID string `json:"childSessionId"`
				}
				_ = json.Unmarshal(ev.Data, &c)
				kids = append(kids, c.ChildSessionID)
			}
		}
		return len(kids) == 2
	})
	e.endSession(id, `{"message":"bye"}`)
	if d, _, _ := e.ended(id); d.Reason != wire.EndTerminated {
		t.Fatalf("the parent ended %+v", d)
	}
	for _, k := range kids {
		cur := e.waitState(k, record.StateEnded)
		d, _, _ := e.ended(k)
		if d.Reason != wire.EndClosed {
			t.Fatalf("child %s ended %+v (record %s), want closed", k, d, cur.Record.State)
		}
	}
}

// TestEndTwiceAppliedOnce: two ends accepted while a step runs (before the
// first applies) end the session once.
func TestEndTwiceAppliedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"end.twice","text":"/sleep 1h"}`).SessionID
	e.waitEvents(id, "the step running", func(evs []wire.Event) bool { return harness.Count(evs, "turn.started") == 1 })
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range 2 {
		wg.Go(func() { codes[i], _ = e.post("/v1/sessions/"+id+"/end", `{"message":"end `+string(rune('a'+i))+`"}`) })
	}
	wg.Wait()
	for _, c := range codes {
		if c != http.StatusAccepted && c != http.StatusGone {
			t.Fatalf("ends answered %v, want 202 (or 410 once the first applied)", codes)
		}
	}
	d, _, evs := e.ended(id)
	if d.By != wire.EndedByUser || !strings.HasPrefix(d.Message, "end ") {
		t.Fatalf("session.ended %+v", d)
	}
	if n := harness.Count(evs, "turn.cancelled"); n != 1 {
		t.Fatalf("%d turn.cancelled: %v", n, kindsOf(evs))
	}
}

// TestEndQuarantinedByUser: a quarantined session runs nowhere, so the
// user's end is carried out by the finisher: session.ended {terminated,
// by user, message}; a later end is 410.
func TestEndQuarantinedByUser(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.quarantinedAlone("end.quarantined")
	e.owner("v1", "p2", quarantining)
	rc := e.endSession(id, `{"message":"stuck, starting over"}`)
	if rc.SessionID != id || rc.Seq != 0 {
		t.Fatalf("receipt %+v, want seq 0 (nothing in the inbox)", rc)
	}
	done := e.waitState(id, record.StateEnded)
	d, last, _ := e.ended(id)
	if d.Reason != wire.EndTerminated || d.By != wire.EndedByUser || d.Message != "stuck, starting over" || last.V != 4 ||
		last.Seq != done.Record.EventSeqFloor {
		t.Fatalf("session.ended %d v%d %s (floor %d), want v4 {terminated, by user, message}", last.Seq, last.V, last.Data, done.Record.EventSeqFloor)
	}
	checkError(t, e, http.MethodPost, "/v1/sessions/"+id+"/end", ``, testToken, http.StatusGone, "gone")
}

// TestEndBadInput: a bad end body is 400 and writes nothing; the end of an
// unknown session is 404; the end of a session whose deployment reads an
// inbox version before terminate is 422 unsupported_command naming it,
// over HTTP and NATS, nothing sent.
func TestEndBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.handSession("sess-end-bad", "v1", 1, 1, nil)
	if err := e.ing.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := e.durable()
	for _, body := range []string{
		`{"message":""}`, `{"message":"` + strings.Repeat("x", wire.MaxEndMessageBytes+1) + `"}`, `{"message":7}`,
		`{"reason":"x"}`, `{"message":"a","extra":1}`, `[]`, `{"message":null}`,
	} {
		checkError(t, e, http.MethodPost, "/v1/sessions/sess-end-bad/end", body, testToken, http.StatusBadRequest, "bad_request")
	}
	microError(t, e, "end", `{"message":"no session named"}`, "400", "bad_request")
	checkError(t, e, http.MethodPost, "/v1/sessions/NOSUCH/end", ``, testToken, http.StatusNotFound, "not_found")
	microError(t, e, "end", `{"sessionId":"NOSUCH"}`, "404", "not_found")
	wantError(t, e, "/v1/sessions/sess-end-bad/end", `{"message":"bye"}`, http.StatusUnprocessableEntity, "unsupported_command", "deployment v1")
	microError(t, e, "end", `{"sessionId":"sess-end-bad"}`, "422", "unsupported_command")
	if after := e.durable(); !equalDurable(before, after) {
		t.Fatalf("a refused end wrote: %v -> %v", before, after)
	}
}

// TestEndWhereNoOwnerRuns: a session whose deployment has no live owner
// (and none that would take it) is ended by the finisher — an owner of
// another deployment — from an end request in its record: session.ended
// {terminated, by user, message}, its addresses tombstoned, later
// deliveries 410. With no owner at all, the end is pending (202, seq 0)
// (deliveries meanwhile 410) and no owner runs the session: the first
// owner of its own deployment that starts ends it instead of booting it.
func TestEndWhereNoOwnerRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ingress.Config) { c.FinishWait = 2 * time.Second })
	quick := func(c *pool.Config) { c.HibernateAfter, c.SweepInterval = 100*time.Millisecond, 200*time.Millisecond }
	stop := e.owner("v1", "p1", quick)
	id := e.create(`{"alias":"end-orphan","text":"hello"}`).SessionID
	pending := e.create(`{"alias":"end.pending","text":"hello"}`).SessionID
	e.waitState(id, record.StateHibernated)
	e.waitState(pending, record.StateHibernated)
	stop()
	noOwnerOfV1 := func() {
		e.eventually(10*time.Second, "the ingress sees no owner of v1", func() bool {
			var rep ingress.DrainReport
			e.mustAdmin(http.MethodGet, "/v1/admin/deployments", ``, http.StatusOK, &rep)
			for _, d := range rep.Deployments {
				if d.DeploymentID == "v1" && len(d.Owners) > 0 {
					return false
				}
			}
			return true
		})
	}
	noOwnerOfV1()

	// No owner anywhere: the end waits in the record.
	rc := e.endSession(pending, `{"message":"later"}`)
	if rc.Seq != 0 || rc.OwnerLive {
		t.Fatalf("receipt %+v, want seq 0 and no live owner", rc)
	}
	if cur := e.leader(pending); !cur.Record.FinishPending() || cur.Record.Finish.EndedBy != record.EndedByUser ||
		cur.Record.State != record.StateHibernated {
		t.Fatalf("record after the pending end: %s finish %+v", cur.Record.State, cur.Record.Finish)
	}
	e.endSession(pending, ``) // the same request: accepted, applied once
	checkError(t, e, http.MethodPost, "/v1/deliveries", `{"alias":"end.pending","text":"too late"}`, testToken, http.StatusGone, "gone")

	// An owner of its own deployment that starts ends it, and never boots
	// it: the sweep finds the pending end, and so does a wake.
	stop = e.owner("v1", "p3", quick)
	e.waitState(pending, record.StateEnded)
	d, _, evs := e.ended(pending)
	if d.By != wire.EndedByUser || d.Message != "later" {
		t.Fatalf("the pending end: %+v", d)
	}
	if n := harness.Count(evs, "session.started"); n != 1 || harness.Count(evs, "command.applied") != 1 {
		t.Fatalf("the session ran again before its end: %v", kindsOf(evs))
	}

	// With no owner of v1 again, an owner of another deployment finishes
	// the other session at once.
	stop()
	noOwnerOfV1()
	e.owner("v2", "p2", quick)
	e.endSession(id, `{"message":"bye"}`)
	done := e.waitState(id, record.StateEnded)
	if !done.Record.Terminated() || done.Record.Finish != nil || done.Record.DeploymentID != "v1" {
		t.Fatalf("record after the finisher's end: %+v", done.Record)
	}
	d, last, _ := e.ended(id)
	if d.Reason != wire.EndTerminated || d.By != wire.EndedByUser || d.Message != "bye" || last.Seq != done.Record.EventSeqFloor {
		t.Fatalf("session.ended %d %s (floor %d)", last.Seq, last.Data, done.Record.EventSeqFloor)
	}
	if h, _, err := e.Store.GetHook(t.Context(), "end-orphan"); err != nil || !h.Tombstone {
		t.Fatalf("alias after the end: %+v %v", h, err)
	}
	checkError(t, e, http.MethodPost, "/v1/deliveries", `{"alias":"end-orphan","text":"again"}`, testToken, http.StatusGone, "gone")

}
