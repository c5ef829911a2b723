package ingress_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// parentCheckpoint is a parent's checkpoint as its owner commits it: handle
// h1 active on child (waiting for input creq-1 and authorization catt-1),
// h2 parked on other, h3 closed.
func parentCheckpoint(child, other string) *wire.Checkpoint {
	return &wire.Checkpoint{
		Handles: []wire.HandleState{
			{Handle: "h1", Generation: 1, ChildSessionID: child, DeploymentID: "v1", State: wire.HandleActive, TurnID: "t1", CommandID: "c1"},
			{Handle: "h2", Generation: 1, ChildSessionID: other, DeploymentID: "v2", State: wire.HandleParked},
			{Handle: "h3", Generation: 2, ChildSessionID: "fam-gone", DeploymentID: "v1", State: wire.HandleClosed},
		},
		ChildWaits: []wire.ChildWait{
			{Handle: "h1", ChildSessionID: child, RequestID: "creq-1", Question: "colour?"},
			{Handle: "h1", ChildSessionID: child, AttemptID: "catt-1"},
		},
	}
}

// childCheckpoint is a child's: its parent holds it by handle h1.
func childCheckpoint(parent string) *wire.Checkpoint {
	return &wire.Checkpoint{Parent: &wire.ParentRef{SessionID: parent, Handle: "h1", Depth: 1}}
}

// A session's status lists its handles (every state) and, for a child, its
// parent and depth; a session with an active handle or a child's wait is
// not idle.
func TestStatusFamily(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.handSession("fam-parent", "v1", 1, 1, parentCheckpoint("fam-child", "fam-other"))
	e.handSession("fam-child", "v1", 1, 1, childCheckpoint("fam-parent"))

	_, b := e.call(http.MethodGet, "/v1/sessions/fam-parent", "", testToken)
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["parentSessionId"]; ok {
		t.Fatalf("a root's status has parentSessionId: %s", b)
	}
	var handles []map[string]string
	if err := json.Unmarshal(raw["handles"], &handles); err != nil || len(handles) != 3 {
		t.Fatalf("handles %s: %v", raw["handles"], err)
	}
	want := map[string]string{"handle": "h1", "childSessionId": "fam-child", "state": "active", "deploymentId": "v1"}
	if !equalMap(handles[0], want) || handles[1]["state"] != "parked" || handles[2]["state"] != "closed" {
		t.Fatalf("handles %v", handles)
	}
	if st := e.status("fam-parent"); st.Idle {
		t.Fatalf("a parent with an active handle is idle: %+v", st)
	}

	st := e.status("fam-child")
	if st.ParentSessionID != "fam-parent" || st.Depth != 1 || st.Handles != nil || !st.Idle {
		t.Fatalf("child status %+v", st)
	}
	// Parked and closed handles only, no child waits: idle again.
	e.rewriteCheckpoint("fam-parent", func(cp *wire.Checkpoint) {
		cp.Handles, cp.ChildWaits = cp.Handles[1:], nil
	})
	if st := e.status("fam-parent"); !st.Idle || len(st.Handles) != 2 {
		t.Fatalf("a parent with parked handles: %+v", st)
	}
}

// An input or authorization answer sent to a parent for a wait of its
// child (the parent checkpoint's childWaits) is routed to the child: the
// command is in the child's inbox, encoded for the child's record version,
// and the receipt names the child.
func TestInputRoutedToChild(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Both sessions written by hand, with no owner: a running child would
	// apply the routed answer and purge it before the test reads it.
	child := "fam-kid"
	e.handSession(child, "elsewhere", wire.CurrentVersion, wire.CurrentVersion, childCheckpoint("fam-par"))
	e.handSession("fam-par", "elsewhere", 1, 1, parentCheckpoint(child, "fam-other"))
	parentInbox := e.Names.Inbox(subjects.StableToken("fam-par"))

	for _, tc := range []struct{ path, body, kind string }{
		{"/v1/sessions/fam-par/input", `{"requestId":"creq-1","value":"green"}`, "input.response"},
		{"/v1/sessions/fam-par/authorize", `{"attemptId":"catt-1","result":"granted"}`, "auth.callback"},
	} {
		var rc struct {
			SessionID string `json:"sessionId"`
			Seq       uint64 `json:"seq"`
		}
		e.must(tc.path, tc.body, http.StatusAccepted, &rc)
		if rc.SessionID != child {
			t.Fatalf("POST %s: receipt names %s, want the child %s", tc.path, rc.SessionID, child)
		}
		var cmd struct {
			V             int
			Kind          string
			InputResponse *wire.InputResponse
			AuthCallback  *wire.AuthCallback
		}
		if err := json.Unmarshal(e.inboxAt(rc.Seq, subjects.StableToken(child)), &cmd); err != nil || cmd.Kind != tc.kind || cmd.V != wire.CurrentVersion {
			t.Fatalf("child inbox at %d: %+v %v", rc.Seq, cmd, err)
		}
		if cmd.InputResponse != nil && cmd.InputResponse.RequestID != "creq-1" || cmd.AuthCallback != nil && cmd.AuthCallback.AttemptID != "catt-1" {
			t.Fatalf("routed command %+v", cmd)
		}
	}
	if n := e.inboxCount(parentInbox); n != 0 {
		t.Fatalf("%d commands in the parent's inbox, want none", n)
	}
	// An ID neither the parent nor a child waits for: 409, and the
	// expected IDs include the child's.
	code, b := e.post("/v1/sessions/fam-par/input", `{"requestId":"nobody","value":1}`)
	var eb struct {
		Error struct {
			Code     string
			Expected []string
		}
	}
	if err := json.Unmarshal(b, &eb); err != nil || code != http.StatusConflict || eb.Error.Code != "unknown_request" || !slices.Equal(eb.Error.Expected, []string{"creq-1"}) {
		t.Fatalf("unknown request = %d %s", code, b)
	}
}

// inboxAt is the inbox message at stream sequence seq, which must be on
// token's subject.
func (e *env) inboxAt(seq uint64, tok string) []byte {
	e.t.Helper()
	st, err := e.JS.Stream(e.t.Context(), e.Names.InboxStream())
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := st.GetMsg(e.t.Context(), seq)
	if err != nil || m.Subject != e.Names.Inbox(tok) {
		e.t.Fatalf("inbox seq %d: %v (subject %v, want %s)", seq, err, m, e.Names.Inbox(tok))
	}
	return m.Data
}

// inboxCount counts the messages on an inbox subject.
func (e *env) inboxCount(subject string) uint64 {
	e.t.Helper()
	st, err := e.JS.Stream(e.t.Context(), e.Names.InboxStream())
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := st.Info(e.t.Context(), jetstream.WithSubjectFilter(subject))
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.Subjects[subject]
}

// rewriteCheckpoint changes a session's checkpoint by CAS.
func (e *env) rewriteCheckpoint(id string, change func(*wire.Checkpoint)) {
	e.t.Helper()
	e.rewrite(id, func(b []byte) []byte {
		cp, err := wire.DecodeCheckpoint(b)
		if err != nil {
			e.t.Fatal(err)
		}
		change(&cp)
		return encodeCheckpoint(e.t, cp)
	})
}

func equalMap(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The drain report tells a parent kept busy by its children (why "child",
// with the IDs of those it waits for: its active handles' children, then
// those of waits; a parked handle's is not one) and lists a child's parent
// on its entry.
func TestDrainReportFamily(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.handSession("fam-parent", "fam", 1, 1, parentCheckpoint("fam-child", "fam-other"))
	cp := childCheckpoint("fam-parent")
	cp.Waits.Input = &wire.InputWait{RequestID: "creq-1", Question: "colour?"}
	e.handSession("fam-child", "fam", 1, 1, cp)
	e.handSession("fam-other", "fam", 1, 1, childCheckpoint("fam-parent")) // parked: idle

	d, ok := depReport(e.report(""), "fam")
	if !ok || d.Idle != 0 || len(d.NotIdle) != 2 || d.Sessions["hibernated"] != 3 { // hibernated: idle unless they wait, counted not read
		t.Fatalf("report of fam: %+v", d)
	}
	byID := map[string]ingress.SessionReport{}
	for _, sr := range d.NotIdle {
		byID[sr.SessionID] = sr
	}
	p, c := byID["fam-parent"], byID["fam-child"]
	if p.Why != "child" || !slices.Equal(p.Children, []string{"fam-child"}) || p.ParentSessionID != "" {
		t.Fatalf("parent entry %+v", p)
	}
	if c.Why != "input" || c.ParentSessionID != "fam-parent" || c.Children != nil {
		t.Fatalf("child entry %+v", c)
	}
	// The wire names.
	_, b := e.admin(http.MethodGet, "/v1/admin/deployments", "")
	if !strings.Contains(string(b), `"children":["fam-child"]`) || !strings.Contains(string(b), `"parentSessionId":"fam-parent"`) {
		t.Fatalf("report JSON %s", b)
	}
}

// A quarantined parent with an active child is not retried elsewhere
// without force; an operator's end of it ends its open children (end,
// reason closed; one that does not exist is skipped) and leaves a closed
// handle's alone.
func TestEndQuarantinedParentEndsChildren(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	child := e.create(`{}`).SessionID
	cp := &wire.Checkpoint{Handles: []wire.HandleState{
		{Handle: "h1", Generation: 1, ChildSessionID: child, DeploymentID: "v1", State: wire.HandleParked},
		{Handle: "h2", Generation: 1, ChildSessionID: "fam-absent", DeploymentID: "v1", State: wire.HandleActive, TurnID: "t1", CommandID: "c1"},
		{Handle: "h3", Generation: 2, ChildSessionID: "fam-gone", DeploymentID: "v1", State: wire.HandleClosed},
	}}
	e.handSession("fam-q", "v9", 2, 2, cp)
	cur := e.leader("fam-q")
	rec := cur.Record
	rec.State = record.StateQuarantined
	rec.Quarantine = &record.QuarantineInfo{Attempts: 3, Error: "process_died", Since: time.Now().UTC(), DeploymentID: "v9"}
	if _, err := e.Store.UpdateSession(t.Context(), rec, cur.Revision); err != nil {
		t.Fatal(err)
	}

	// An active child is a live wait: no unforced retry elsewhere.
	checkError(t, e, http.MethodPost, "/v1/admin/sessions/fam-q/retry", `{"deploymentId":"v1"}`, adminToken, http.StatusConflict, "waits_pending")

	var end ingress.Ended
	e.mustAdmin(http.MethodPost, "/v1/admin/sessions/fam-q/end", ``, http.StatusOK, &end)
	if !slices.Equal(end.ChildrenEnded, []string{child}) {
		t.Fatalf("end = %+v, want the open child ended", end)
	}
	evs := e.waitEvents(child, "the child's end", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventSessionEnded) == 1 })
	last := evs[len(evs)-1]
	if last.Kind != wire.EventSessionEnded || last.V != 3 || string(last.Data) != `{"reason":"closed"}` {
		t.Fatalf("child's last event %+v", last)
	}
}
