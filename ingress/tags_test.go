package ingress_test

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/wire"
)

// tagged is the resulting set of a session.tagged event.
func tagged(t *testing.T, ev wire.Event) map[string]string {
	t.Helper()
	var d wire.SessionTagged
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		t.Fatalf("session.tagged data %s: %v", ev.Data, err)
	}
	return d.Tags
}

// patchTags sends PATCH /v1/sessions/{id} and expects 202.
func (e *env) patchTags(id, body string) ingress.Receipt {
	e.t.Helper()
	code, b := e.call(http.MethodPatch, "/v1/sessions/"+id, body, testToken)
	if code != http.StatusAccepted {
		e.t.Fatalf("PATCH %s %s = %d %s", id, body, code, b)
	}
	var rc ingress.Receipt
	if err := json.Unmarshal(b, &rc); err != nil {
		e.t.Fatal(err)
	}
	return rc
}

// TestTagsThroughCreation: tags given by POST /v1/sessions and by the
// delivery that creates a session are in status and the index; a delivery
// to an existing session ignores its tags.
func TestTagsThroughCreation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	a := e.create(`{"alias":"tag.a","text":"hello","tags":{"tenant":"acme","user":"U123"}}`).SessionID
	b := e.deliver(`{"alias":"tag.b","text":"hello","tags":{"tenant":"beta"}}`)
	if !b.Created {
		t.Fatalf("the delivery did not create tag.b: %+v", b)
	}
	plain := e.create(`{"alias":"tag.plain","text":"hello"}`).SessionID
	if got := e.status(a).Tags; !maps.Equal(got, map[string]string{"tenant": "acme", "user": "U123"}) {
		t.Fatalf("status of a: tags %v", got)
	}
	if got := e.status(b.SessionID).Tags; !maps.Equal(got, map[string]string{"tenant": "beta"}) {
		t.Fatalf("status of b: tags %v", got)
	}
	if st := e.status(plain); st.Tags == nil || len(st.Tags) != 0 {
		t.Fatalf("status of an untagged session: tags %#v, want {}", st.Tags)
	}
	// Resume-first: tags on a delivery to an existing session are ignored.
	rc := e.deliver(`{"alias":"tag.b","text":"again","tags":{"tenant":"other","x":"y"}}`)
	if rc.Created || rc.SessionID != b.SessionID {
		t.Fatalf("second delivery: %+v", rc)
	}
	e.waitEvents(b.SessionID, "the second output", func(evs []wire.Event) bool {
		return harness.Count(evs, "message.output") >= 2
	})
	if got := e.status(b.SessionID).Tags; !maps.Equal(got, map[string]string{"tenant": "beta"}) {
		t.Fatalf("a delivery to an existing session changed its tags: %v", got)
	}
	if n := harness.Count(e.events(b.SessionID, 0), wire.EventSessionTagged); n != 0 {
		t.Fatalf("%d session.tagged events for a delivery's ignored tags", n)
	}
	e.eventually(10*time.Second, "the index lists by tag", func() bool {
		return slices.Equal(e.listIDs("tag=tenant:acme"), []string{a}) &&
			slices.Equal(e.listIDs("tag=tenant:beta"), []string{b.SessionID}) &&
			slices.Equal(e.listIDs("tag=tenant:acme&tag=user:U123"), []string{a})
	})
	// The checkpoint of a tagged session is at the state version of tags
	// (7); one without tags is not.
	const tagsState = 7
	if v := e.stateV(a); v != tagsState {
		t.Fatalf("tagged session's checkpoint at state version %d, want %d", v, tagsState)
	}
	if v := e.stateV(plain); v >= tagsState {
		t.Fatalf("untagged session's checkpoint at state version %d, want below %d", v, tagsState)
	}
}

// stateV is the state version the session's committed checkpoint declares.
func (e *env) stateV(id string) int {
	e.t.Helper()
	v, err := wire.ReadStateVersion(e.leader(id).Record.Checkpoint)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

// TestTagPatchWhileStepRuns: a PATCH sent while a step runs is applied at
// the next boundary: the step is not interrupted, its commit lands, the
// owner keeps its epoch, and session.tagged carries the merged set.
func TestTagPatchWhileStepRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"tag.step","tags":{"tenant":"acme","user":"U1"}}`).SessionID
	e.deliver(`{"alias":"tag.step","text":"/sleep 2s"}`)
	e.waitEvents(id, "the step running", func(evs []wire.Event) bool { return harness.Count(evs, "turn.started") == 1 })
	before := e.leader(id).Record
	rc := e.patchTags(id, `{"tags":{"user":null,"tier":"gold"}}`)
	evs := e.waitEvents(id, "session.tagged", func(evs []wire.Event) bool {
		return harness.Count(evs, wire.EventSessionTagged) == 1
	})
	slept := slices.IndexFunc(evs, harness.IsKind(demo.EventSlept))
	tag := slices.IndexFunc(evs, harness.IsKind(wire.EventSessionTagged))
	if slept < 0 || slept > tag {
		t.Fatalf("session.tagged (at %d) is not after the running step's commit (demo.slept at %d):\n%s", tag, slept, harness.Trace(evs))
	}
	for _, k := range []string{"step.interrupted", "turn.cancelled"} {
		if harness.Count(evs, k) != 0 {
			t.Fatalf("the tag command disturbed the step (%s):\n%s", k, harness.Trace(evs))
		}
	}
	if got := tagged(t, evs[tag]); !maps.Equal(got, map[string]string{"tenant": "acme", "tier": "gold"}) {
		t.Fatalf("session.tagged %v", got)
	}
	ap, ok := harness.Find(evs, func(ev wire.Event) bool {
		var d wire.CommandApplied
		return ev.Kind == "command.applied" && json.Unmarshal(ev.Data, &d) == nil && d.Seq == rc.Seq && d.Kind == "tag"
	})
	if !ok || ap.Seq > evs[tag].Seq {
		t.Fatalf("no command.applied of the tag command (inbox seq %d) before session.tagged:\n%s", rc.Seq, harness.Trace(evs))
	}
	after := e.leader(id).Record
	if after.Epoch != before.Epoch || after.OwnerRunID != before.OwnerRunID {
		t.Fatalf("the owner changed: epoch %d → %d, run %s → %s", before.Epoch, after.Epoch, before.OwnerRunID, after.OwnerRunID)
	}
	if got := e.status(id).Tags; !maps.Equal(got, map[string]string{"tenant": "acme", "tier": "gold"}) {
		t.Fatalf("status tags %v", got)
	}
	e.eventually(10*time.Second, "the index follows the change", func() bool {
		return slices.Equal(e.listIDs("tag=tier:gold"), []string{id}) && len(e.listIDs("tag=user:U1")) == 0
	})
}

// TestTagsAcrossHandoff: a tagged session moved to another deployment
// keeps its tags, and the new owner applies a later change.
func TestTagsAcrossHandoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	e.owner("v2", "p2")
	v2 := ingressFor(t, e, "v2")
	id := e.create(`{"alias":"tag.move","text":"a1","tags":{"tenant":"acme"}}`).SessionID
	e.waitEvents(id, "a1", func(evs []wire.Event) bool {
		_, ok := harness.Find(evs, harness.IsOutput("a1"))
		return ok && evs[len(evs)-1].Kind == "session.waiting"
	})
	postTo(t, v2, `{"alias":"tag.move","text":"b1"}`)
	e.waitEvents(id, "b1 on v2", func(evs []wire.Event) bool {
		ev, ok := harness.Find(evs, harness.IsOutput("b1"))
		return ok && ev.DeploymentID == "v2"
	})
	if cur := e.leader(id).Record; cur.DeploymentID != "v2" {
		t.Fatalf("the session is on %s, want v2", cur.DeploymentID)
	}
	if got := e.status(id).Tags; !maps.Equal(got, map[string]string{"tenant": "acme"}) {
		t.Fatalf("tags after the handoff: %v", got)
	}
	e.patchTags(id, `{"tags":{"moved":"yes"}}`)
	evs := e.waitEvents(id, "session.tagged on v2", func(evs []wire.Event) bool {
		return harness.Count(evs, wire.EventSessionTagged) == 1
	})
	ev, _ := harness.Find(evs, harness.IsKind(wire.EventSessionTagged))
	if got := tagged(t, ev); ev.DeploymentID != "v2" || !maps.Equal(got, map[string]string{"tenant": "acme", "moved": "yes"}) {
		t.Fatalf("session.tagged by %s: %v", ev.DeploymentID, got)
	}
	e.eventually(10*time.Second, "the index names v2 and the new tag", func() bool {
		l := e.list("?tag=moved:yes")
		return len(l.Sessions) == 1 && l.Sessions[0].DeploymentID == "v2"
	})
}

// TestChildrenInheritTags: a new child starts with its parent's tags, or
// with the tags its delegation names (none with an empty set).
func TestChildrenInheritTags(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"tag.parent","tags":{"tenant":"acme","user":"U1"}}`).SessionID
	for i, c := range []struct {
		directive string
		want      map[string]string
	}{
		{"/spawn r work", map[string]string{"tenant": "acme", "user": "U1"}},
		{"/spawn q#team=blue,tenant=acme work", map[string]string{"team": "blue", "tenant": "acme"}},
		{"/spawn z# work", map[string]string{}},
	} {
		e.deliver(jsonBody(map[string]string{"alias": "tag.parent", "text": c.directive}))
		evs := e.waitEvents(id, c.directive, func(evs []wire.Event) bool {
			return harness.Count(evs, "child.completed") == i+1
		})
		var started []wire.ChildStarted
		for _, ev := range evs {
			if ev.Kind == "child.started" {
				var d wire.ChildStarted
				if err := json.Unmarshal(ev.Data, &d); err != nil {
					t.Fatal(err)
				}
				started = append(started, d)
			}
		}
		child := started[i].ChildSessionID
		if got := e.status(child).Tags; !maps.Equal(got, c.want) {
			t.Fatalf("%s: child tags %v, want %v", c.directive, got, c.want)
		}
	}
	e.eventually(10*time.Second, "the index lists the children by tag", func() bool {
		return len(e.listIDs(fmt.Sprintf("tag=tenant:acme&parent=%s", id))) == 2 &&
			len(e.listIDs("tag=team:blue")) == 1
	})
}

// TestTagsUnsupported: tags for a deployment whose owners do not read
// them are refused with 422 tags_unsupported naming it, and nothing is
// written: no session is created, no command is published.
func TestTagsUnsupported(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stop := e.owner("v1", "p1")
	// An ingress stamping "old", whose owners advertise inbox versions 1
	// and 2 (a build before tags).
	if err := e.Store.AdvertiseDeployment(t.Context(), "old", []int{1, 2}, []int{1, 2, 3, 4, 5, 6}); err != nil {
		t.Fatal(err)
	}
	old := ingressFor(t, e, "old")
	for _, c := range []struct{ path, body string }{
		{"/v1/sessions", `{"alias":"tag.old","tags":{"tenant":"acme"}}`},
		{"/v1/deliveries", `{"alias":"tag.old","text":"hi","tags":{"tenant":"acme"}}`},
	} {
		code, b := callTo(t, old, http.MethodPost, c.path, c.body)
		var eb ingress.ErrorBody
		if err := json.Unmarshal(b, &eb); err != nil || code != http.StatusUnprocessableEntity ||
			eb.Error.Code != ingress.CodeTagsUnsupported || !strings.Contains(eb.Error.Message, "deployment old") {
			t.Fatalf("POST %s %s through old = %d %s, want 422 tags_unsupported naming old", c.path, c.body, code, b)
		}
	}
	checkError(t, e, http.MethodGet, "/v1/sessions?alias=tag.old", "", testToken, http.StatusNotFound, "not_found")

	// A session whose owning deployment reads inbox version 2: PATCH is
	// refused before anything is published.
	id := e.create(`{"alias":"tag.v2","text":"hello"}`).SessionID
	e.waitEvents(id, "settled", func(evs []wire.Event) bool { return len(evs) > 0 && evs[len(evs)-1].Kind == "session.waiting" })
	stop()
	cur := e.leader(id)
	rec := cur.Record
	rec.WireV = 2
	if _, err := e.Store.UpdateSession(t.Context(), rec, cur.Revision); err != nil {
		t.Fatal(err)
	}
	seqBefore := e.lastInboxSeq()
	checkError(t, e, http.MethodPatch, "/v1/sessions/"+id, `{"tags":{"tenant":"acme"}}`, testToken, http.StatusUnprocessableEntity, ingress.CodeTagsUnsupported)
	if got := e.lastInboxSeq(); got != seqBefore {
		t.Fatalf("the refused PATCH published a command (inbox last seq %d → %d)", seqBefore, got)
	}
	if st := e.status(id); len(st.Tags) != 0 || st.QueueDepth != 0 {
		t.Fatalf("after the refused PATCH: tags %v, queueDepth %d", st.Tags, st.QueueDepth)
	}
}

// lastInboxSeq is the inbox stream's last sequence.
func (e *env) lastInboxSeq() uint64 {
	e.t.Helper()
	s, err := e.JS.Stream(e.t.Context(), e.Names.InboxStream())
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.LastSeq
}

// TestTagsBadInput: every malformed tag set is 400 invalid_tags, a change
// beyond 16 tags 422 too_many_tags; nothing is written.
func TestTagsBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	long := strings.Repeat("v", wire.MaxTagValueBytes+1)
	for _, tags := range []string{
		`[]`, `"x"`, `{"Tenant":"x"}`, `{"":"x"}`, `{"a b":"x"}`, `{"k":1}`, `{"k":null}`,
		`{"` + strings.Repeat("k", 65) + `":"x"}`, `{"k":"` + long + `"}`, seventeen(),
	} {
		checkError(t, e, http.MethodPost, "/v1/sessions", `{"tags":`+tags+`}`, testToken, http.StatusBadRequest, ingress.CodeInvalidTags)
		checkError(t, e, http.MethodPost, "/v1/deliveries", `{"alias":"tag.bad","text":"x","tags":`+tags+`}`, testToken, http.StatusBadRequest, ingress.CodeInvalidTags)
	}
	// null for a member is refused as for every member (omit it instead).
	checkError(t, e, http.MethodPost, "/v1/sessions", `{"tags":null}`, testToken, http.StatusBadRequest, "bad_request")
	checkError(t, e, http.MethodGet, "/v1/sessions?alias=tag.bad", "", testToken, http.StatusNotFound, "not_found")
	id := e.create(`{"alias":"tag.full","tags":` + sixteen() + `}`).SessionID
	checkError(t, e, http.MethodPatch, "/v1/sessions/"+id, `{"tags":null}`, testToken, http.StatusBadRequest, "bad_request")
	for _, body := range []string{``, `{}`, `{"tags":{}}`, `{"tags":[]}`, `{"tags":{"A":"x"}}`,
		`{"tags":{"k":"` + long + `"}}`, `{"tags":{"k":1}}`} {
		checkError(t, e, http.MethodPatch, "/v1/sessions/"+id, body, testToken, http.StatusBadRequest, ingress.CodeInvalidTags)
	}
	checkError(t, e, http.MethodPatch, "/v1/sessions/"+id, `{"tags":{"k":"x"},"text":"no"}`, testToken, http.StatusBadRequest, "bad_request")
	checkError(t, e, http.MethodPatch, "/v1/sessions/"+id, `{"tags":{"one.more":"x"}}`, testToken, http.StatusUnprocessableEntity, ingress.CodeTooManyTags)
	checkError(t, e, http.MethodPatch, "/v1/sessions/nope.nope", `{"tags":{"k":"x"}}`, testToken, http.StatusBadRequest, "bad_request")
	// Replacing one of sixteen is fine: a removal and a set in one merge.
	e.patchTags(id, `{"tags":{"k00":null,"one.more":"x"}}`)
	evs := e.waitEvents(id, "session.tagged", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventSessionTagged) == 1 })
	ev, _ := harness.Find(evs, harness.IsKind(wire.EventSessionTagged))
	if got := tagged(t, ev); len(got) != wire.MaxTags || got["one.more"] != "x" || got["k00"] != "" {
		t.Fatalf("session.tagged %v", got)
	}
}

func sixteen() string { return tagSet(wire.MaxTags) }

func seventeen() string { return tagSet(wire.MaxTags + 1) }

func tagSet(n int) string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("k%02d", i)] = "v"
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// callTo sends a request to another ingress's server (no token: it runs
// with --insecure-dev).
func callTo(t *testing.T, srv *httptest.Server, method, path, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}
