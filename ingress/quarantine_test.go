package ingress_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/wire"
)

// backoff is the quarantine backoff of these tests' owners.
var backoff = []time.Duration{150 * time.Millisecond, 300 * time.Millisecond}

// quarantining: owners that hibernate quiet sessions at once, sweep their
// inbox often and back off briefly between boot attempts (quarantine after
// the default three).
func quarantining(c *pool.Config) {
	c.HibernateAfter, c.InboxSweepInterval, c.QuarantineBackoff = 100*time.Millisecond, 200*time.Millisecond, backoff
}

func (e *env) leader(id string) record.Session {
	e.t.Helper()
	cur, err := e.Store.LeaderSession(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return cur
}

func (e *env) waitState(id string, st record.State) record.Session {
	e.t.Helper()
	var cur record.Session
	e.eventually(20*time.Second, "session "+id+" "+string(st), func() bool {
		cur = e.leader(id)
		return cur.Record.State == st
	})
	return cur
}

// rewrite replaces the record's checkpoint by CAS (state and all else
// kept) and returns the one it replaced.
func (e *env) rewrite(id string, cp func([]byte) []byte) []byte {
	e.t.Helper()
	cur := e.leader(id)
	rec := cur.Record
	orig := rec.Checkpoint
	rec.Checkpoint = cp(orig)
	if _, err := e.Store.UpdateSession(e.t.Context(), rec, cur.Revision); err != nil {
		e.t.Fatal(err)
	}
	return orig
}

// unsupported sets a state version no build reads, as a newer build's
// checkpoint looks to this one.
func unsupported(t *testing.T) func([]byte) []byte {
	return func(cp []byte) []byte {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(cp, &doc); err != nil {
			t.Fatal(err)
		}
		doc["stateV"] = json.RawMessage("99")
		b, _ := json.Marshal(doc)
		return b
	}
}

// attempts reads the record's history (the bucket keeps 8 revisions) and
// returns the counted attempts in order: each revision that raised
// BootAttempts, with when it was counted.
func (e *env) attempts(id string) []record.SessionRecord {
	e.t.Helper()
	kv, err := e.JS.KeyValue(e.t.Context(), e.Names.SessionsBucket())
	if err != nil {
		e.t.Fatal(err)
	}
	hist, err := kv.History(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []record.SessionRecord
	prev := 0
	for _, h := range hist {
		var r record.SessionRecord
		if json.Unmarshal(h.Value(), &r) != nil {
			continue
		}
		if r.BootAttempts > prev {
			out = append(out, r)
		}
		prev = r.BootAttempts
	}
	return out
}

// A session whose checkpoint no build can read (an unsupported state
// version written straight into its record) is quarantined after three
// attempts, each after the backoff; the deliveries made meanwhile are
// accepted and kept; status and the drain report show it. After the
// record is repaired, retry boots it on its own deployment and the queued
// deliveries are applied in order; the counter is back to 0.
func TestQuarantineRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1", quarantining)
	id := e.create(`{"alias":"qa-1","text":"hello"}`).SessionID
	e.waitEvents(id, "hello", func(evs []wire.Event) bool { return slices.Contains(harness.Outputs(evs), "hello") })
	e.waitState(id, record.StateHibernated)
	orig := e.rewrite(id, unsupported(t))

	one := e.deliver(`{"alias":"qa-1","text":"one"}`)
	q := e.waitState(id, record.StateQuarantined)
	two := e.deliver(`{"alias":"qa-1","text":"two"}`)
	counted := e.attempts(id)
	if len(counted) != 3 || q.Record.Quarantine.Attempts != 3 || !strings.Contains(q.Record.Quarantine.Error, "unsupported") {
		t.Fatalf("attempts %d, quarantine %+v", len(counted), q.Record.Quarantine)
	}
	for i := 1; i < len(counted); i++ {
		gap := counted[i].BootAttemptAt.Sub(counted[i-1].BootAttemptAt)
		t.Logf("attempt %d counted %v after attempt %d (backoff %v)", i+1, gap.Round(time.Millisecond), i, backoff[i-1])
		if gap < backoff[i-1] {
			t.Fatalf("attempt %d came %v after the previous one, before its backoff %v", i+1, gap, backoff[i-1])
		}
	}

	st := e.status(id)
	if st.State != "quarantined" || st.Quarantine == nil || st.Quarantine.Attempts != 3 || st.Quarantine.Since.IsZero() ||
		st.Idle || st.QueueDepth != 2 || st.BootAttempts != 3 || st.EventSeq != q.Record.EventSeqFloor {
		t.Fatalf("status %+v (quarantine %+v)", st, st.Quarantine)
	}
	v1, _ := depReport(e.report(""), "v1")
	if v1.Sessions["quarantined"] != 1 || !slices.ContainsFunc(v1.NotIdle, func(r ingress.SessionReport) bool { return r.SessionID == id && r.Why == "quarantined" }) {
		t.Fatalf("drain report %+v", v1)
	}
	checkError(t, e, http.MethodPost, "/v1/admin/sessions/"+id+"/release", ``, adminToken, http.StatusConflict, "quarantined")

	e.rewrite(id, func([]byte) []byte { return orig })
	var rt ingress.Retried
	e.mustAdmin(http.MethodPost, "/v1/admin/sessions/"+id+"/retry", `{}`, http.StatusOK, &rt)
	if rt.DeploymentID != "v1" || rt.FromDeploymentID != "v1" || rt.EventSeq != q.Record.EventSeqFloor+1 || rt.Force {
		t.Fatalf("retry = %+v", rt)
	}
	evs := e.waitEvents(id, "the queued deliveries", func(evs []wire.Event) bool { return slices.Contains(harness.Outputs(evs), "two") })
	contiguous(t, evs, 0)
	if got := harness.Outputs(evs); !slices.Equal(got, []string{"hello", "one", "two"}) {
		t.Fatalf("outputs %q", got)
	}
	var seqs []uint64
	for _, a := range applied(t, evs) {
		seqs = append(seqs, a.Seq)
	}
	if len(seqs) != 3 || seqs[1] != one.Seq || seqs[2] != two.Seq {
		t.Fatalf("applied inbox seqs %v, want the creation's, then %d and %d (each once, in order)", seqs, one.Seq, two.Seq)
	}
	order := kindsOf(evs)
	iq, ir, ione := slices.Index(order, wire.EventSessionQuarantined), slices.Index(order, wire.EventSessionRetried), slices.IndexFunc(evs, isOutputEvent("one"))
	if iq < 0 || ir != iq+1 || ione < ir {
		t.Fatalf("events %v: want session.quarantined, session.retried, then the queued deliveries", order)
	}
	if d := harness.LastData[wire.SessionRetried](t, evs, wire.EventSessionRetried); d.DeploymentID != "v1" {
		t.Fatalf("session.retried %+v", d)
	}
	e.eventually(20*time.Second, "the counter at 0", func() bool { return e.status(id).BootAttempts == 0 })
	checkError(t, e, http.MethodPost, "/v1/admin/sessions/"+id+"/retry", ``, adminToken, http.StatusConflict, "not_quarantined")
}

// A session whose history segment is gone from the object store is
// quarantined; once the segment is back, retry with another deployment ID
// adopts it there (BootAdopt: handoff.completed from v1 to v2). Another
// quarantined session is ended: session.ended {terminated} (data version
// 2), its addresses tombstoned, later deliveries answered 410.
func TestQuarantineRetryElsewhereAndEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p1 := e.owner("v1", "p1", quarantining)
	e.owner("v2", "p2", quarantining)
	long := strings.Repeat("a long line of text. ", 450) // ~9 KiB: the history seals a segment
	a := e.create(jsonBody(map[string]string{"alias": "qb-1", "text": long})).SessionID
	b := e.create(`{"alias":"qb-2","text":"hello"}`).SessionID
	e.waitState(a, record.StateHibernated)
	e.waitState(b, record.StateHibernated)
	seg, segData := e.deleteSegment(a)
	p1() // its segment cache still holds the segment: a fresh process of v1 does not
	e.owner("v1", "p1b", quarantining)
	e.rewrite(b, unsupported(t))
	e.deliver(`{"alias":"qb-1","text":"after the loss"}`)
	e.deliver(`{"alias":"qb-2","text":"to be ended"}`)
	qa := e.waitState(a, record.StateQuarantined)
	e.waitState(b, record.StateQuarantined)
	if !strings.Contains(qa.Record.Quarantine.Error, "history") {
		t.Fatalf("quarantine of a: %+v", qa.Record.Quarantine)
	}

	// Refusals, writing nothing.
	for _, tc := range []struct{ path, body string }{
		{"/v1/admin/sessions/" + a + "/retry", `{"deploymentId":"latest"}`},
		{"/v1/admin/sessions/" + a + "/retry", `{"deployment":"v2"}`},
		{"/v1/admin/sessions/" + a + "/end", `{"force":true}`},
	} {
		if code, body := e.admin(http.MethodPost, tc.path, tc.body); code != http.StatusBadRequest {
			t.Fatalf("%s %s = %d %s, want 400", tc.path, tc.body, code, body)
		}
	}
	checkError(t, e, http.MethodPost, "/v1/admin/sessions/"+b+"/retry", `{"deploymentId":"v2"}`, adminToken, http.StatusConflict, "waits_pending")
	checkError(t, e, http.MethodPost, "/v1/admin/sessions/NOSUCHSESSION/end", ``, adminToken, http.StatusNotFound, "session_not_found")

	e.putSegment(seg, segData)
	var rt ingress.Retried
	e.mustAdmin(http.MethodPost, "/v1/admin/sessions/"+a+"/retry", `{"deploymentId":"v2"}`, http.StatusOK, &rt)
	if rt.DeploymentID != "v2" || rt.FromDeploymentID != "v1" {
		t.Fatalf("retry = %+v", rt)
	}
	// v2 adopts it (BootAdopt) right after session.retried; the queued
	// delivery, accepted by this ingress of v1, then hands the idle session
	// back to v1 by the ordinary rule, and is applied there.
	evs := e.waitEvents(a, "the queued delivery", func(evs []wire.Event) bool { return slices.Contains(harness.Outputs(evs), "after the loss") })
	contiguous(t, evs, 0)
	ir := slices.Index(kindsOf(evs), wire.EventSessionRetried)
	if ir < 0 || ir+1 >= len(evs) || evs[ir+1].Kind != wire.EventHandoffCompleted {
		t.Fatalf("events %v: want handoff.completed right after session.retried", kindsOf(evs))
	}
	var hc wire.HandoffCompleted
	if err := json.Unmarshal(evs[ir+1].Data, &hc); err != nil || hc.FromDeploymentID != "v1" || hc.ToDeploymentID != "v2" ||
		!strings.HasPrefix(hc.HandoffID, "adopt-") || hc.Epoch != qa.Record.Epoch+1 {
		t.Fatalf("adoption %+v (%v), quarantined at epoch %d", hc, err, qa.Record.Epoch)
	}
	if got := applied(t, evs); len(got) != 2 {
		t.Fatalf("applied %+v, want the creation's and the queued delivery", got)
	}
	if cur := e.leader(a); cur.Record.Retry != nil || cur.Record.Quarantined() {
		t.Fatalf("record after the retry: %+v", cur.Record)
	}

	var end ingress.Ended
	e.mustAdmin(http.MethodPost, "/v1/admin/sessions/"+b+"/end", ``, http.StatusOK, &end)
	if end.Reason != "terminated" || !slices.Equal(end.Tombstoned, []string{b, "qb-2"}) {
		t.Fatalf("end = %+v", end)
	}
	for _, tok := range []string{b, "qb-2"} {
		if h, _, err := e.Store.GetHook(t.Context(), tok); err != nil || !h.Tombstone {
			t.Fatalf("hook %s after the end: %+v %v", tok, h, err)
		}
	}
	evs = e.waitEvents(b, "session.ended", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventSessionEnded) == 1 })
	contiguous(t, evs, 0)
	last := evs[len(evs)-1]
	if last.Kind != wire.EventSessionEnded || last.V != 4 || string(last.Data) != `{"reason":"terminated","by":"admin"}` || last.Seq != end.EventSeq {
		t.Fatalf("last event %+v", last)
	}
	if st := e.status(b); st.State != "ended" || st.Quarantine != nil {
		t.Fatalf("status after the end %+v", st)
	}
	checkError(t, e, http.MethodPost, "/v1/deliveries", `{"alias":"qb-2","text":"too late"}`, testToken, http.StatusGone, "gone")
	checkError(t, e, http.MethodPost, "/v1/deliveries", `{"sessionId":"`+b+`","text":"too late"}`, testToken, http.StatusGone, "gone")
	checkError(t, e, http.MethodPost, "/v1/admin/sessions/"+b+"/end", ``, adminToken, http.StatusConflict, "not_quarantined")
	checkError(t, e, http.MethodPost, "/v1/admin/sessions/"+a+"/end", ``, adminToken, http.StatusConflict, "not_quarantined")
	if code, _ := e.call(http.MethodGet, "/v1/sessions/"+b+"/events?after="+strconv.FormatUint(end.EventSeq, 10), "", testToken); code != http.StatusNoContent {
		t.Fatalf("SSE after the end: %d, want 204", code)
	}
}

// deleteSegment deletes the first history segment of the session's
// checkpoint from the object store and returns its name and content.
func (e *env) deleteSegment(id string) (string, []byte) {
	e.t.Helper()
	cp, err := wire.DecodeCheckpoint(e.leader(id).Record.Checkpoint)
	if err != nil || len(cp.HistorySegments) == 0 {
		e.t.Fatalf("no history segment to delete: %v %+v", err, cp.HistorySegments)
	}
	obs, err := e.JS.ObjectStore(e.t.Context(), e.Names.StateBucket())
	if err != nil {
		e.t.Fatal(err)
	}
	name := cp.HistorySegments[0].Digest
	b, err := obs.GetBytes(e.t.Context(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := obs.Delete(e.t.Context(), name); err != nil {
		e.t.Fatal(err)
	}
	return name, b
}

func (e *env) putSegment(name string, b []byte) {
	e.t.Helper()
	obs, err := e.JS.ObjectStore(e.t.Context(), e.Names.StateBucket())
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := obs.PutBytes(e.t.Context(), name, b); err != nil {
		e.t.Fatal(err)
	}
}

func kindsOf(evs []wire.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind
	}
	return out
}

func isOutputEvent(text string) func(wire.Event) bool {
	return func(ev wire.Event) bool {
		return ev.Kind == wire.EventMessageOutput && slices.Contains(harness.Outputs([]wire.Event{ev}), text)
	}
}
