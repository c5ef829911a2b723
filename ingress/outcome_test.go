package ingress_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// outcome reads GET /v1/sessions/{id}/commands/{seq} and expects 200; it
// returns the answer and its raw body.
func (e *env) outcome(id string, seq uint64) (ingress.CommandOutcome, string) {
	e.t.Helper()
	code, b := e.call(http.MethodGet, fmt.Sprintf("/v1/sessions/%s/commands/%d", id, seq), "", testToken)
	if code != http.StatusOK {
		e.t.Fatalf("GET command %d of %s = %d %s", seq, id, code, b)
	}
	var out ingress.CommandOutcome
	if err := json.Unmarshal(b, &out); err != nil {
		e.t.Fatalf("command %d of %s: %v: %s", seq, id, err, b)
	}
	if out.SessionID != id || out.Seq != seq {
		e.t.Fatalf("command %d of %s: answer names %s/%d", seq, id, out.SessionID, out.Seq)
	}
	return out, string(b)
}

// settled waits for the terminal event of inbox seq in the session's
// events and returns it.
func (e *env) settled(id string, seq uint64) wire.Event {
	e.t.Helper()
	var found wire.Event
	e.waitEvents(id, fmt.Sprintf("the outcome of inbox seq %d", seq), func(evs []wire.Event) bool {
		for _, ev := range evs {
			var d struct{ Seq uint64 }
			if _, ok := ingress.OutcomeStatus(ev.Kind); ok && json.Unmarshal(ev.Data, &d) == nil && d.Seq == seq {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

var ulidPattern = regexp.MustCompile(`^[0-9A-HJKMNP-TV-Z]{26}$`)

// TestCommandOutcomeApplied: the receipts of a create's first message and
// of deliveries carry the command's id; once the owner applied them, the
// lookup says applied with that id and the command.applied event's seq,
// over HTTP and NATS. An idempotent repeat carries the first command's id.
// A deleted session is 410 deleted.
func TestCommandOutcomeApplied(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	c := e.create(`{"alias":"oc.applied","text":"hello"}`)
	if c.Seq == 0 || !ulidPattern.MatchString(c.CommandID) {
		t.Fatalf("create receipt %+v: want a seq and a ULID commandId", c)
	}
	id := c.SessionID
	r := e.deliver(`{"alias":"oc.applied","text":"second"}`)
	if !ulidPattern.MatchString(r.CommandID) || r.CommandID == c.CommandID {
		t.Fatalf("delivery receipt %+v: want a new ULID commandId", r)
	}
	k1 := e.deliver(`{"sessionId":"` + id + `","text":"once","idempotencyKey":"oc-key"}`)
	k2 := e.deliver(`{"sessionId":"` + id + `","text":"once","idempotencyKey":"oc-key"}`)
	if k1.CommandID == "" || k1 != k2 {
		t.Fatalf("idempotent repeat %+v, first %+v: want the same receipt, commandId included", k2, k1)
	}
	for _, rc := range []struct {
		seq uint64
		id  string
	}{{c.Seq, c.CommandID}, {r.Seq, r.CommandID}, {k1.Seq, k1.CommandID}} {
		ev := e.settled(id, rc.seq)
		if ev.Kind != wire.EventCommandApplied {
			t.Fatalf("inbox seq %d settled by %s", rc.seq, ev.Kind)
		}
		got, raw := e.outcome(id, rc.seq)
		want := ingress.CommandOutcome{SessionID: id, Seq: rc.seq, Status: ingress.CommandApplied, CommandID: rc.id, EventSeq: ev.Seq}
		if got != want {
			t.Fatalf("command %d: %s, want %+v", rc.seq, raw, want)
		}
		var nats ingress.CommandOutcome
		req(t, e, "command", fmt.Sprintf(`{"sessionId":%q,"seq":%d}`, id, rc.seq), &nats)
		if nats != want {
			t.Fatalf("command %d over NATS: %+v, want %+v", rc.seq, nats, want)
		}
	}
	e.deleteSession(id, "?force=true")
	checkError(t, e, http.MethodGet, fmt.Sprintf("/v1/sessions/%s/commands/%d", id, r.Seq), ``, testToken, http.StatusGone, ingress.CodeDeleted)
	microError(t, e, "command", fmt.Sprintf(`{"sessionId":%q,"seq":%d}`, id, r.Seq), "410", ingress.CodeDeleted)
}

// TestCommandOutcomePending: a command to a session whose owner is gone
// waits in the inbox: pending, with the receipt's commandId and no
// eventSeq. Asked of another session it is command_not_found. Once an
// owner runs again, it is applied.
func TestCommandOutcomePending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stop := e.owner("v1", "p1")
	id := e.create(`{"alias":"oc.pending","text":"hello"}`).SessionID
	other := e.create(`{"alias":"oc.other","text":"hello"}`).SessionID
	for _, s := range []string{id, other} {
		e.waitEvents(s, "its answer", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventMessageOutput) == 1 })
	}
	stop()
	// The ingress learns of the stop by its watch of the owners' leases.
	e.eventually(10*time.Second, "the ingress sees no owner", func() bool { return !e.status(id).OwnerLive })
	r := e.deliver(`{"alias":"oc.pending","text":"anyone?"}`)
	if r.OwnerLive {
		t.Fatalf("receipt %+v: an owner is live", r)
	}
	got, raw := e.outcome(id, r.Seq)
	if want := (ingress.CommandOutcome{SessionID: id, Seq: r.Seq, Status: ingress.CommandPending, CommandID: r.CommandID}); got != want {
		t.Fatalf("pending command: %s, want %+v", raw, want)
	}
	if strings.Contains(raw, "eventSeq") {
		t.Fatalf("pending command: %s has an eventSeq", raw)
	}
	// The message is on another session's inbox subject.
	checkError(t, e, http.MethodGet, fmt.Sprintf("/v1/sessions/%s/commands/%d", other, r.Seq), ``, testToken, http.StatusNotFound, ingress.CodeCommandNotFound)

	e.owner("v1", "p2")
	e.deliver(`{"alias":"oc.pending","text":"wake up"}`)
	ev := e.settled(id, r.Seq)
	got, raw = e.outcome(id, r.Seq)
	if want := (ingress.CommandOutcome{SessionID: id, Seq: r.Seq, Status: ingress.CommandApplied, CommandID: r.CommandID, EventSeq: ev.Seq}); got != want {
		t.Fatalf("the command once applied: %s, want %+v", raw, want)
	}
}

// TestCommandOutcomeRejected: two tag changes accepted while no owner
// runs, each fine against the session's fifteen tags, together one too
// many: the owner applies the first and refuses the second
// (command.rejected, too_many_tags), which the lookup says.
func TestCommandOutcomeRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stop := e.owner("v1", "p1")
	id := e.create(`{"alias":"oc.tags","tags":` + tagSet(wire.MaxTags-1) + `}`).SessionID
	stop()
	first := e.patchTags(id, `{"tags":{"one":"1"}}`)
	second := e.patchTags(id, `{"tags":{"two":"2"}}`)
	e.owner("v1", "p2")
	e.deliver(`{"alias":"oc.tags","text":"wake up"}`)

	ev := e.settled(id, second.Seq)
	if ev.Kind != wire.EventCommandRejected {
		t.Fatalf("the second tag change settled by %s %s", ev.Kind, ev.Data)
	}
	got, raw := e.outcome(id, second.Seq)
	want := ingress.CommandOutcome{SessionID: id, Seq: second.Seq, Status: ingress.CommandRejected, CommandID: second.CommandID,
		EventSeq: ev.Seq, Reason: wire.RejectTooManyTags}
	if got != want {
		t.Fatalf("rejected tag change: %s, want %+v", raw, want)
	}
	if got, raw := e.outcome(id, first.Seq); got.Status != ingress.CommandApplied || got.CommandID != first.CommandID || got.EventSeq == 0 {
		t.Fatalf("applied tag change: %s", raw)
	}
}

// TestCommandOutcomeInvalid: payloads published straight to a session's
// inbox that its owner cannot decode are recorded as wire.rejected: the
// lookup says invalid with the reason and the id the event names.
func TestCommandOutcomeInvalid(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"oc.invalid","text":"hello"}`).SessionID
	e.waitEvents(id, "its answer", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventMessageOutput) == 1 })
	var seqs []uint64
	for _, b := range []string{
		`not json at all`,
		`{"v":1,"kind":"teleport","id":"oc-k1","acceptedDeploymentId":"v1","acceptedAt":"2026-11-30T00:00:00Z"}`,
	} {
		ack, err := e.JS.Publish(t.Context(), e.Names.Inbox(subjects.StableToken(id)), []byte(b))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	e.deliver(`{"alias":"oc.invalid","text":"still there?"}`)
	// The owner names a payload without an id rejected-<seq>.
	for i, wantID := range []string{fmt.Sprintf("rejected-%d", seqs[0]), "oc-k1"} {
		ev := e.settled(id, seqs[i])
		got, raw := e.outcome(id, seqs[i])
		if got.Status != ingress.CommandInvalid || got.EventSeq != ev.Seq || got.CommandID != wantID || got.Reason == "" {
			t.Fatalf("undecodable payload %d: %s, want invalid at event %d with commandId %q and a reason", i, raw, ev.Seq, wantID)
		}
	}
}

// TestOutcomeStatus: each terminal event kind maps to its status; no
// other kind settles a command.
func TestOutcomeStatus(t *testing.T) {
	t.Parallel()
	for kind, want := range map[string]string{
		wire.EventCommandApplied:    ingress.CommandApplied,
		wire.EventCommandRejected:   ingress.CommandRejected,
		wire.EventCommandSuperseded: ingress.CommandSuperseded,
		wire.EventWireRejected:      ingress.CommandInvalid,
	} {
		if got, ok := ingress.OutcomeStatus(kind); !ok || got != want {
			t.Errorf("OutcomeStatus(%s) = %q %v, want %q", kind, got, ok, want)
		}
	}
	for _, kind := range []string{wire.EventTurnStarted, wire.EventMessageOutput, wire.EventSessionTagged, "", "command.applied.x"} {
		if got, ok := ingress.OutcomeStatus(kind); ok {
			t.Errorf("OutcomeStatus(%q) = %q, want none", kind, got)
		}
	}
}

// handEvents appends events to a hand-written session's event subject, as
// its owner would (its seqs from 1 on, the seq header), published
// asynchronously, 500 at a time.
func (e *env) handEvents(id string, evs ...wire.Event) {
	e.t.Helper()
	for len(evs) > 500 {
		e.handEvents(id, evs[:500]...)
		evs = evs[500:]
	}
	for _, ev := range evs {
		ev.SessionID, ev.Time, ev.OwnerRunID, ev.DeploymentID, ev.V = id, time.Now().UTC(), "run-"+id, "v1", 1
		b, err := json.Marshal(ev)
		if err != nil {
			e.t.Fatal(err)
		}
		msg := &nats.Msg{Subject: e.Names.Events(id), Data: b, Header: nats.Header{}}
		msg.Header.Set(wire.HeaderEventSeq, strconv.FormatUint(ev.Seq, 10))
		if _, err := e.JS.PublishMsgAsync(msg, jetstream.WithMsgID(fmt.Sprintf("%s/%d", id, ev.Seq))); err != nil {
			e.t.Fatal(err)
		}
	}
	select {
	case <-e.JS.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		e.t.Fatal("events not acknowledged")
	}
}

func handEvent(seq uint64, kind, data string) wire.Event {
	return wire.Event{Seq: seq, Kind: kind, Data: json.RawMessage(data)}
}

// TestCommandOutcomeHandWritten: a session written by hand (no owner)
// whose events say what the runtime does not produce yet
// (command.superseded), and every refusal: a bad seq, an unknown session,
// a seq beyond the inbox, one on another subject, one gone from the inbox
// that no event names, one the record counts as processed with no
// outcome event.
func TestCommandOutcomeHandWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const id = "oc-hand"
	tok := subjects.StableToken(id)
	send := func(cid string) uint64 {
		_, seq, err := e.Send(t.Context(), tok, harness.WithID(cid, harness.Deliver("x")))
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	old, newer, orphan, pending := send("oc-c1"), send("oc-c2"), send("oc-c3"), send("oc-c4")
	_, elsewhere, err := e.Send(t.Context(), "oc-elsewhere", harness.WithID("oc-c5", harness.Deliver("x")))
	if err != nil {
		t.Fatal(err)
	}
	// orphan: processed (below the record's low mark) but no event names it;
	// gone: a sequence deleted from the inbox that no event names.
	gone := send("oc-c6")
	st, err := e.JS.Stream(t.Context(), e.Names.InboxStream())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteMsg(t.Context(), gone); err != nil {
		t.Fatal(err)
	}
	e.handSession(id, "v1", wire.CurrentVersion, wire.CurrentVersion, &wire.Checkpoint{
		EventSeq: 3, Applied: wire.Applied{Low: pending, IDs: []string{"oc-c1", "oc-c2", "oc-c3"}}})
	e.handEvents(id,
		handEvent(1, wire.EventSessionStarted, `{}`),
		handEvent(2, wire.EventCommandSuperseded, fmt.Sprintf(`{"commandId":"oc-c1","seq":%d,"by":%d}`, old, newer)),
		handEvent(3, wire.EventCommandApplied, fmt.Sprintf(`{"commandId":"oc-c2","seq":%d,"kind":"deliver"}`, newer)),
	)

	got, raw := e.outcome(id, old)
	if want := (ingress.CommandOutcome{SessionID: id, Seq: old, Status: ingress.CommandSuperseded, CommandID: "oc-c1", EventSeq: 2, SupersededBy: newer}); got != want {
		t.Fatalf("superseded: %s, want %+v", raw, want)
	}
	if got, raw := e.outcome(id, newer); got.Status != ingress.CommandApplied || got.EventSeq != 3 || got.CommandID != "oc-c2" {
		t.Fatalf("applied: %s", raw)
	}
	if got, raw := e.outcome(id, pending); got.Status != ingress.CommandPending || got.CommandID != "oc-c4" || got.EventSeq != 0 {
		t.Fatalf("pending: %s", raw)
	}

	path := func(id string, seq any) string { return fmt.Sprintf("/v1/sessions/%s/commands/%v", id, seq) }
	for _, bad := range []string{"0", "-1", "abc", "1.5", "0x10", "18446744073709551616"} {
		checkError(t, e, http.MethodGet, path(id, bad), ``, testToken, http.StatusBadRequest, ingress.CodeBadRequest)
	}
	checkError(t, e, http.MethodGet, path("bad.id", 1), ``, testToken, http.StatusBadRequest, ingress.CodeBadRequest)
	checkError(t, e, http.MethodGet, path("oc-nobody", old), ``, testToken, http.StatusNotFound, ingress.CodeNotFound)
	checkError(t, e, http.MethodGet, path(id, e.lastInboxSeq()+1), ``, testToken, http.StatusNotFound, ingress.CodeCommandNotFound)
	checkError(t, e, http.MethodGet, path(id, elsewhere), ``, testToken, http.StatusNotFound, ingress.CodeCommandNotFound)
	checkError(t, e, http.MethodGet, path(id, gone), ``, testToken, http.StatusNotFound, ingress.CodeCommandNotFound)
	checkError(t, e, http.MethodGet, path(id, orphan), ``, testToken, http.StatusNotFound, ingress.CodeOutcomeNotFound)
	checkError(t, e, http.MethodGet, path(id, old), ``, "", http.StatusUnauthorized, ingress.CodeUnauthorized)
	checkError(t, e, http.MethodPost, path(id, old), ``, testToken, http.StatusMethodNotAllowed, ingress.CodeMethodNotAllowed)

	for body, code := range map[string]string{
		`{"sessionId":"oc-hand"}`:                          "400 " + ingress.CodeBadRequest,
		`{"sessionId":"oc-hand","seq":0}`:                  "400 " + ingress.CodeBadRequest,
		`{"sessionId":"oc-hand","seq":"1"}`:                "400 " + ingress.CodeBadRequest,
		`{"sessionId":"oc-hand","seq":1,"x":1}`:            "400 " + ingress.CodeBadRequest,
		`{"seq":1}`:                                        "400 " + ingress.CodeBadRequest,
		`{"sessionId":"oc-nobody","seq":1}`:                "404 " + ingress.CodeNotFound,
		fmt.Sprintf(`{"sessionId":%q,"seq":%d}`, id, gone): "404 " + ingress.CodeCommandNotFound,
	} {
		status, c, _ := strings.Cut(code, " ")
		microError(t, e, "command", body, status, c)
	}
	var over ingress.CommandOutcome
	req(t, e, "command", fmt.Sprintf(`{"sessionId":%q,"seq":%d}`, id, old), &over)
	if over.Status != ingress.CommandSuperseded || over.SupersededBy != newer {
		t.Fatalf("superseded over NATS: %+v", over)
	}
}

// TestCommandOutcomeBound: the search reads at most
// ingress.MaxOutcomeScan events, newest first: an outcome older than that
// is outcome_not_found, one within it is found.
func TestCommandOutcomeBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const id = "oc-long"
	tok := subjects.StableToken(id)
	var seqs []uint64 // of oc-first, oc-edge, oc-last
	for _, cid := range []string{"oc-first", "oc-edge", "oc-last"} {
		_, seq, err := e.Send(t.Context(), tok, harness.WithID(cid, harness.Deliver("x")))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	n := uint64(ingress.MaxOutcomeScan + 2)
	e.handSession(id, "v1", wire.CurrentVersion, wire.CurrentVersion, &wire.Checkpoint{
		EventSeq: n, Applied: wire.Applied{Low: seqs[2] + 1}})
	// 1: session.started, 2: oc-first's outcome, 3: oc-edge's (the
	// MaxOutcomeScan-th event from the newest), outputs, oc-last's last.
	applied := func(seq uint64, i int, cid string) wire.Event {
		return handEvent(seq, wire.EventCommandApplied, fmt.Sprintf(`{"commandId":%q,"seq":%d,"kind":"deliver"}`, cid, seqs[i]))
	}
	evs := []wire.Event{handEvent(1, wire.EventSessionStarted, `{}`), applied(2, 0, "oc-first"), applied(3, 1, "oc-edge")}
	for seq := uint64(4); seq < n; seq++ {
		evs = append(evs, handEvent(seq, wire.EventMessageOutput, `{"text":"x"}`))
	}
	e.handEvents(id, append(evs, applied(n, 2, "oc-last"))...)

	if got, raw := e.outcome(id, seqs[2]); got.Status != ingress.CommandApplied || got.EventSeq != n {
		t.Fatalf("the newest outcome: %s", raw)
	}
	start := time.Now()
	if got, raw := e.outcome(id, seqs[1]); got.Status != ingress.CommandApplied || got.EventSeq != 3 || got.CommandID != "oc-edge" {
		t.Fatalf("the outcome at the bound: %s", raw)
	}
	t.Logf("a lookup that read %d events took %v", ingress.MaxOutcomeScan, time.Since(start))
	start = time.Now()
	checkError(t, e, http.MethodGet, fmt.Sprintf("/v1/sessions/%s/commands/%d", id, seqs[0]), ``, testToken, http.StatusNotFound, ingress.CodeOutcomeNotFound)
	t.Logf("a lookup that read %d events and gave up took %v", ingress.MaxOutcomeScan, time.Since(start))
}
