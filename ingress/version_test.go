package ingress_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// handSession writes a session the way an owner of deployment dep reading
// inbox version wireV leaves it, without an owner: its record (with cp as
// its checkpoint; nil for a minimal one) and the hooks of its stable token
// and aliases, stamped hookV.
func (e *env) handSession(id, dep string, wireV, hookV int, cp *wire.Checkpoint, aliases ...string) {
	e.t.Helper()
	if cp == nil {
		cp = &wire.Checkpoint{}
	}
	cp.SessionID, cp.Tokens, cp.Started = id, append([]string{id}, aliases...), true
	b := encodeCheckpoint(e.t, *cp)
	rec := record.SessionRecord{
		SessionID: id, OwnerRunID: "run-" + id, DeploymentID: dep, Epoch: 1, OwnerProcess: "p-" + dep,
		State: record.StateHibernated, Consumer: subjects.Consumer(id, 1), WireV: wireV,
		Writer: "run-" + id, WriteCounter: 1, Checkpoint: b,
	}
	rev, err := e.Store.CreateSession(e.t.Context(), rec)
	if err != nil {
		e.t.Fatal(err)
	}
	// Its index entry, as its owner would have written it.
	ix := record.DeriveIndex(rec, rev, *cp, subjects.DefaultAgent)
	ix.CreatedAt = time.Now().UTC()
	if _, err := e.index().Put(e.t.Context(), ix, false); err != nil {
		e.t.Fatal(err)
	}
	for _, addr := range cp.Tokens {
		tok, err := subjects.EncodeToken(addr)
		if err != nil {
			e.t.Fatal(err)
		}
		if addr == id {
			tok = subjects.StableToken(id)
		}
		if _, err := e.Store.CreateHook(e.t.Context(), record.Hook{Token: tok, SessionID: id, WireV: hookV}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// lastInbox is the last command on an address's inbox subject, as stored.
func (e *env) lastInbox(tok string) []byte {
	e.t.Helper()
	st, err := e.JS.Stream(e.t.Context(), e.Names.InboxStream())
	if err != nil {
		e.t.Fatal(err)
	}
	m, err := st.GetLastMsgForSubject(e.t.Context(), e.Names.Inbox(tok))
	if err != nil {
		e.t.Fatalf("inbox %s: %v", tok, err)
	}
	return m.Data
}

// The session record is the version source: a record that says wire
// version 1 gets "v":1 commands whatever the hook was stamped with (the
// hook's stamp is written once, at creation).
func TestWireVersionFromRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.handSession("sess-v1", "old", 1, 99, nil, "stamped")
	for _, body := range []string{`{"sessionId":"sess-v1","text":"by id"}`, `{"alias":"stamped","text":"by alias"}`} {
		if r := e.deliver(body); r.SessionID != "sess-v1" || r.Created {
			t.Fatalf("delivery %s = %+v", body, r)
		}
	}
	for _, tok := range []string{subjects.StableToken("sess-v1"), "stamped"} {
		var head struct{ V int }
		if err := json.Unmarshal(e.lastInbox(tok), &head); err != nil || head.V != 1 {
			t.Fatalf("inbox %s: v = %d (%v), want 1", tok, head.V, err)
		}
	}
}

// A record without a stamp falls back to the hook's.
func TestWireVersionHookFallback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.handSession("sess-v0", "old", 0, 99, nil)
	checkError(t, e, http.MethodPost, "/v1/deliveries", `{"sessionId":"sess-v0","text":"x"}`, testToken, http.StatusUnprocessableEntity, "unsupported_command")
}

// A record stamped with a version this build cannot produce refuses every
// command with 422 unsupported_command naming the owning deployment, and
// nothing is written.
func TestUnsupportedCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.handSession("sess-v99", "future", 99, 1, nil, "newer")
	if err := e.ing.Ready(t.Context()); err != nil {
		t.Fatal(err)
	}
	before := e.durable()
	for _, req := range [][2]string{
		{"/v1/deliveries", `{"sessionId":"sess-v99","text":"x"}`},
		{"/v1/deliveries", `{"alias":"newer","text":"x"}`},
		{"/v1/sessions/sess-v99/cancel", ``},
		{"/v1/sessions/sess-v99/compact", `{"idempotencyKey":"k1"}`},
	} {
		code, b := e.post(req[0], req[1])
		var eb struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(b, &eb); err != nil || code != http.StatusUnprocessableEntity || eb.Error.Code != "unsupported_command" {
			t.Fatalf("POST %s %s = %d %s, want 422 unsupported_command", req[0], req[1], code, b)
		}
		if !strings.Contains(eb.Error.Message, "future") {
			t.Fatalf("message %q does not name the owning deployment", eb.Error.Message)
		}
	}
	if after := e.durable(); !equalDurable(before, after) {
		t.Fatalf("a refused request wrote: %v -> %v", before, after)
	}
}

// A running owner has advertised the versions its build reads in its
// deployment record.
func TestOwnerAdvertisesVersions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.Store.DeploymentReads(t.Context(), "v1"); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("before any owner: err = %v, want ErrNotFound", err)
	}
	e.owner("v1", "p1")
	var want []int
	for v := 1; v <= wire.CurrentVersion; v++ {
		want = append(want, v)
	}
	got, err := e.Store.DeploymentReads(t.Context(), "v1")
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("reads = %v %v, want %v", got, err, want)
	}
	d, _, err := e.Store.GetDeployment(t.Context(), "v1")
	if err != nil || len(d.StateVersions) == 0 || d.StateVersions[len(d.StateVersions)-1] != wire.CurrentStateVersion || d.Retired {
		t.Fatalf("deployment record %+v %v", d, err)
	}
}

// encodeCheckpoint encodes cp as an owner commits it. Until package wire
// declares the subagent members (handles, childWaits, parent) at their own
// state version (5), EncodeCheckpoint stamps a checkpoint that uses only
// them with an older version whose frozen schema refuses them on decode;
// such a checkpoint is stamped with the current state version instead,
// whose schema is the Go type's (and so declares them). Once wire has the
// version, the checkpoint decodes as encoded and this changes nothing.
func encodeCheckpoint(t *testing.T, cp wire.Checkpoint) []byte {
	t.Helper()
	b, err := wire.EncodeCheckpoint(cp)
	if err != nil {
		t.Fatalf("encode checkpoint: %v", err)
	}
	if _, err := wire.DecodeCheckpoint(b); err == nil {
		return b
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	doc["stateV"], _ = json.Marshal(wire.CurrentStateVersion)
	b, _ = json.Marshal(doc)
	if _, err := wire.DecodeCheckpoint(b); err != nil {
		t.Fatalf("checkpoint does not decode: %v", err)
	}
	return b
}

// A command stamped with another deployment than the session's triggers a
// handoff whose successor reads it: it is encoded at the newest version
// both read. The ingress's own deployment (v1) is the stamp, the session is
// on green reading version 2: unknown and without owners, v1 cannot take
// the session and the command stays at 2; with a live owner that never
// advertised (a build from before the advertisement) it is encoded at 1;
// advertising 1 and 2, at 2 again.
func TestTriggerEncodedForSuccessor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.handSession("succ-a", "green", 2, 2, nil)
	tok := subjects.StableToken("succ-a")
	version := func() int {
		var head struct{ V int }
		if err := json.Unmarshal(e.lastInbox(tok), &head); err != nil {
			t.Fatal(err)
		}
		return head.V
	}
	// eventually delivers until the stored command has version want (the
	// ingress's fleet view follows the KV within milliseconds).
	eventually := func(what string, want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if r := e.deliver(`{"sessionId":"succ-a","text":"hi"}`); r.DeploymentID != "v1" {
				t.Fatalf("%s: stamped %s, want v1", what, r.DeploymentID)
			}
			if v := version(); v == want {
				return
			} else if time.Now().After(deadline) {
				t.Fatalf("%s: the inbox holds version %d, want %d", what, v, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	e.deliver(`{"sessionId":"succ-a","text":"no successor"}`)
	if v := version(); v != 2 {
		t.Fatalf("no owner of v1: version %d, want 2 (the session's owners')", v)
	}
	if _, err := e.Store.AcquireLease(t.Context(), kv.Lease{ProcessID: "old-build", DeploymentID: "v1", Instance: "i1"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	eventually("a live owner that never advertised", 1)
	if err := e.Store.AdvertiseDeployment(t.Context(), "v1", []int{1, 2}, []int{1}); err != nil {
		t.Fatal(err)
	}
	eventually("an owner advertising 1 and 2", 2)
}
