package ingress_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/wire"
)

// quarantinedAlone quarantines a session (its checkpoint rewritten to a
// state version no build reads) and stops the one owner that ran it.
func (e *env) quarantinedAlone(alias string) string {
	e.t.Helper()
	stop := e.owner("v1", "p1", quarantining)
	id := e.create(`{"alias":"` + alias + `","text":"hello"}`).SessionID
	e.waitState(id, record.StateHibernated)
	e.rewrite(id, unsupported(e.t))
	e.deliver(`{"alias":"` + alias + `","text":"wake"}`)
	e.waitState(id, record.StateQuarantined)
	e.waitEvents(id, "session.quarantined", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventSessionQuarantined) == 1 })
	stop()
	return id
}

// checkEndedOnce checks the stream of an ended session: contiguous, one
// session.ended {terminated, by admin} (data version 4) as its last event,
// at seq.
func checkEndedOnce(t *testing.T, e *env, id string, seq uint64) {
	t.Helper()
	e.waitEvents(id, "session.ended", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventSessionEnded) >= 1 })
	time.Sleep(300 * time.Millisecond) // a second append would be on the stream by now
	evs := e.waitEvents(id, "the stream", func([]wire.Event) bool { return true })
	contiguous(t, evs, 0)
	if n := harness.Count(evs, wire.EventSessionEnded); n != 1 {
		t.Fatalf("%d session.ended events, want 1: %v", n, kindsOf(evs))
	}
	last := evs[len(evs)-1]
	if last.Kind != wire.EventSessionEnded || last.V != 4 || string(last.Data) != `{"reason":"terminated","by":"admin"}` || last.Seq != seq {
		t.Fatalf("last event %d %s v%d %s, want session.ended {terminated, by admin} at %d", last.Seq, last.Kind, last.V, last.Data, seq)
	}
}

// With no owner running, the admin end of a quarantined session is written
// into its record and answered 202 {"pending":true} after the bounded
// wait; nothing is appended. The first owner that starts finds the pending
// end in its sweep and carries it out: one session.ended {terminated}, the
// addresses tombstoned, and a repeated end answers 409 not_quarantined.
func TestEndPendingFinishedWhenAnOwnerStarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ingress.Config) { c.FinishWait = 500 * time.Millisecond })
	id := e.quarantinedAlone("pending-end")
	before := e.waitEvents(id, "the stream", func([]wire.Event) bool { return true })

	code, body := e.admin(http.MethodPost, "/v1/admin/sessions/"+id+"/end", ``)
	if code != http.StatusAccepted || string(body) != `{"pending":true}`+"\n" && string(body) != `{"pending":true}` {
		t.Fatalf("end with no owner = %d %s, want 202 {\"pending\":true}", code, body)
	}
	cur := e.leader(id)
	if !cur.Record.FinishPending() || cur.Record.Finish.Op != record.FinishEnd {
		t.Fatalf("record after the pending end: state %s finish %+v", cur.Record.State, cur.Record.Finish)
	}
	// A repeated end is the same request (202 again); a retry is another
	// one, refused while the end is pending.
	if code, body := e.admin(http.MethodPost, "/v1/admin/sessions/"+id+"/end", ``); code != http.StatusAccepted {
		t.Fatalf("repeated end = %d %s, want 202", code, body)
	}
	checkError(t, e, http.MethodPost, "/v1/admin/sessions/"+id+"/retry", ``, adminToken, http.StatusConflict, "finish_pending")
	if evs := e.waitEvents(id, "the stream", func([]wire.Event) bool { return true }); len(evs) != len(before) {
		t.Fatalf("the pending end appended %v", kindsOf(evs[len(before):]))
	}

	e.owner("v1", "p2", quarantining, func(c *pool.Config) { c.SweepInterval = 200 * time.Millisecond })
	done := e.waitState(id, record.StateEnded)
	if done.Record.Finish != nil || !done.Record.Terminated() || done.Record.OwnerProcess != "" {
		t.Fatalf("record after the finish: %+v", done.Record)
	}
	checkEndedOnce(t, e, id, done.Record.EventSeqFloor)
	for _, tok := range []string{id, "pending-end"} {
		if h, _, err := e.Store.GetHook(t.Context(), tok); err != nil || !h.Tombstone {
			t.Fatalf("hook %s after the end: %+v %v", tok, h, err)
		}
	}
	checkError(t, e, http.MethodPost, "/v1/admin/sessions/"+id+"/end", ``, adminToken, http.StatusConflict, "not_quarantined")
}

// Two admin ends of the same quarantined session at once, with an owner
// running: each answers 200 with the one end's seq — or, when it read the
// record after the other's end was carried out, 409 not_quarantined — and
// the stream holds one session.ended.
func TestEndTwiceAtOnceAppendsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.quarantinedAlone("twice-end")
	e.owner("v1", "p2", quarantining)
	var wg sync.WaitGroup
	out := make([]ingress.Ended, 2)
	errs := make([]ingress.ErrorBody, 2)
	codes := make([]int, 2)
	for i := range 2 {
		wg.Go(func() {
			var b []byte
			codes[i], b = e.admin(http.MethodPost, "/v1/admin/sessions/"+id+"/end", ``)
			_ = json.Unmarshal(b, &out[i])
			_ = json.Unmarshal(b, &errs[i])
		})
	}
	wg.Wait()
	var seq uint64
	for i := range 2 {
		switch {
		case codes[i] == http.StatusOK && out[i].EventSeq != 0 && (seq == 0 || seq == out[i].EventSeq):
			seq = out[i].EventSeq
		case codes[i] == http.StatusConflict && errs[i].Error.Code == "not_quarantined":
		default:
			t.Fatalf("ends answered %v %+v %+v", codes, out, errs)
		}
	}
	if seq == 0 {
		t.Fatalf("no end answered 200: %v %+v", codes, errs)
	}
	checkEndedOnce(t, e, id, seq)
}
