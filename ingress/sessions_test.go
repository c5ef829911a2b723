package ingress_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/failpoint"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/pool"
)

// list reads one listing page of query (url-encoded already).
func (e *env) list(query string) ingress.SessionList {
	e.t.Helper()
	var l ingress.SessionList
	e.mustAdmin(http.MethodGet, "/v1/admin/sessions"+query, "", http.StatusOK, &l)
	return l
}

// listAll walks every page of query; it checks the order (newest first
// by creation time, then by session ID) and that no session is listed
// twice.
func (e *env) listAll(query string) []ingress.ListedSession {
	e.t.Helper()
	out := []ingress.ListedSession{}
	cursor := ""
	for range 200 {
		q := query
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		l := e.list("?" + q)
		out = append(out, l.Sessions...)
		if l.Next == "" {
			for i := 1; i < len(out); i++ {
				a, b := out[i-1], out[i]
				if a.CreatedAt.Truncate(time.Millisecond).Before(b.CreatedAt.Truncate(time.Millisecond)) || a.SessionID == b.SessionID {
					e.t.Fatalf("?%s out of order at %d: %+v then %+v", query, i, a, b)
				}
			}
			return out
		}
		cursor = l.Next
	}
	e.t.Fatalf("listing %s did not end", query)
	return nil
}

// listIDs is listAll's session IDs.
func (e *env) listIDs(query string) []string {
	e.t.Helper()
	ids := []string{}
	for _, s := range e.listAll(query) {
		ids = append(ids, s.SessionID)
	}
	return ids
}

// sameSet reports whether a and b hold the same IDs.
func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(id string) bool { return !slices.Contains(b, id) })
}

func kinds(ws []record.Wait) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, w.Kind)
	}
	return out
}

// TestListSessionsByWait: sessions waiting for input, an authorization,
// a task and a child are listed by each waiting filter (and "any"), by
// parent, newest first (listAll checks the order); their status and their
// listing entries show the same waits, one shape for every kind, two at
// once for a paused one.
func TestListSessionsByWait(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	plain := e.create(`{"alias":"ls-plain","text":"hello"}`).SessionID
	ask := e.create(`{"text":"/ask colour?"}`).SessionID
	auth := e.create(`{"text":"/authorize"}`).SessionID
	task := e.create(`{"text":"/task 1h"}`).SessionID
	parent := e.create(`{"text":"/spawn r /ask size?"}`).SessionID
	var child string
	e.eventually(20*time.Second, "every wait indexed", func() bool {
		ids := e.listIDs("waiting=any")
		if len(ids) != 5 {
			return false
		}
		i := slices.IndexFunc(ids, func(id string) bool { return !slices.Contains([]string{parent, task, auth, ask}, id) })
		child = ids[i]
		return sameSet(ids, []string{child, parent, task, auth, ask})
	})
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"waiting=input", []string{child, ask}},
		{"waiting=authorization", []string{auth}},
		{"waiting=task", []string{task}},
		{"waiting=child", []string{parent}},
		{"parent=" + parent, []string{child}},
		{"", []string{child, parent, task, auth, ask, plain}},
		{"limit=1", []string{child, parent, task, auth, ask, plain}},
		{"agent=default&state=active", []string{child, parent, task, auth, ask, plain}},
		{"deployment=v1&waiting=input&limit=1", []string{child, ask}},
		{"state=hibernated", []string{}},
		{"deployment=v2", []string{}},
		{"agent=other", []string{}},
	} {
		if got := e.listIDs(c.query); !sameSet(got, c.want) {
			t.Errorf("?%s = %v, want %v", c.query, got, c.want)
		}
	}
	st := e.status(ask)
	if len(st.WaitingFor) != 1 || st.WaitingFor[0].Kind != "input" || st.WaitingFor[0].Question != "colour?" ||
		st.WaitingFor[0].RequestID == "" || st.Why != "input" || st.OwnerProcess != "p1" || st.Idle {
		t.Fatalf("status of the asking session: %+v", st)
	}
	if w := e.status(auth).WaitingFor; len(w) != 1 || w[0].Kind != "authorization" || w[0].AttemptID == "" {
		t.Fatalf("status of the authorizing session: %+v", w)
	}
	if w := e.status(task).WaitingFor; len(w) != 1 || w[0].Kind != "task" || w[0].TaskID == "" || w[0].TaskKind != "sleep" {
		t.Fatalf("status of the session with a task: %+v", w)
	}
	if w := e.status(parent).WaitingFor; len(w) != 1 || w[0].Kind != "child" || w[0].SessionID != child {
		t.Fatalf("status of the parent: %+v", w)
	}
	if st := e.status(plain); len(st.WaitingFor) != 0 || st.Why != "" || !st.Idle || st.WaitingFor == nil {
		t.Fatalf("status of an idle session: %+v", st)
	}
	// Two at once: paused, and still waiting for input.
	e.mustAdmin(http.MethodPost, "/v1/admin/sessions/"+ask+"/pause", "", http.StatusAccepted, nil)
	e.eventually(10*time.Second, "paused and waiting", func() bool {
		return slices.Equal(kinds(e.status(ask).WaitingFor), []string{"paused", "input"})
	})
	l := e.list("?waiting=input&limit=5")
	i := slices.IndexFunc(l.Sessions, func(s ingress.ListedSession) bool { return s.SessionID == ask })
	if i < 0 {
		t.Fatalf("the paused session left the input listing: %+v", l)
	}
	got := l.Sessions[i]
	if !slices.Equal(kinds(got.WaitingFor), []string{"paused", "input"}) || got.Idle || got.Agent != "default" ||
		got.DeploymentID != "v1" || got.CreatedAt.IsZero() || got.LastActivityAt.IsZero() || got.EventSeq == 0 || got.Tags == nil {
		t.Fatalf("listing entry of the paused session: %+v", got)
	}
	if p := e.list("?parent=" + parent).Sessions; len(p) != 1 || p[0].ParentSessionID != parent {
		t.Fatalf("the child's entry: %+v", p)
	}
	if a := e.list("?limit=200").Sessions; slices.IndexFunc(a, func(s ingress.ListedSession) bool {
		return s.SessionID == plain && slices.Equal(s.Aliases, []string{"ls-plain"}) && s.Idle
	}) < 0 {
		t.Fatalf("the plain session's entry: %+v", a)
	}
}

// TestStatusByAlias: the session holding an alias answers with its
// status; an alias nobody holds is 404, one whose holder ended 410.
func TestStatusByAlias(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"by-alias","text":"hello"}`).SessionID
	var st ingress.Status
	e.mustGet("/v1/sessions?alias=by-alias", testToken, &st)
	if st.SessionID != id || !slices.Contains(st.Tokens, "by-alias") {
		t.Fatalf("status by alias: %+v", st)
	}
	checkError(t, e, http.MethodGet, "/v1/sessions?alias=nobody", "", testToken, http.StatusNotFound, "not_found")
	ended := e.create(`{"alias":"ends","text":"/done"}`).SessionID
	e.eventually(10*time.Second, "the session ended", func() bool { return e.status(ended).State == "ended" })
	checkError(t, e, http.MethodGet, "/v1/sessions?alias=ends", "", testToken, http.StatusGone, "gone")
	checkError(t, e, http.MethodGet, "/v1/sessions", "", testToken, http.StatusBadRequest, "bad_request")
	checkError(t, e, http.MethodGet, "/v1/sessions?alias=a&alias=b", "", testToken, http.StatusBadRequest, "bad_request")
	checkError(t, e, http.MethodGet, "/v1/sessions?alias=a&x=1", "", testToken, http.StatusBadRequest, "bad_request")
	checkError(t, e, http.MethodGet, "/v1/sessions?alias=by-alias", "", "", http.StatusUnauthorized, "unauthorized")
}

// TestListSessionsBadInput: every malformed filter, limit or cursor is a
// 400 with a code; the listing is an admin route.
func TestListSessionsBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	e.create(`{"text":"hello"}`)
	e.create(`{"text":"hello"}`)
	e.eventually(10*time.Second, "two sessions listed", func() bool { return len(e.listIDs("")) == 2 })
	first := e.list("?limit=1")
	if first.Next == "" || len(first.Sessions) != 1 {
		t.Fatalf("first page: %+v", first)
	}
	for _, q := range []string{"limit=0", "limit=201", "limit=x", "waiting=sleep", "state=asleep", "agent=Bad",
		"parent=a.b", "tag=nokey", "tag=BAD:x", "tag=k:" + string(make([]byte, 257)), "tag=k:a&tag=k:b",
		"state=active&state=ended", "sort=asc"} {
		checkError(t, e, http.MethodGet, "/v1/admin/sessions?"+url.PathEscape(q), "", adminToken, http.StatusBadRequest, "bad_request")
	}
	checkError(t, e, http.MethodGet, "/v1/admin/sessions?deployment=latest", "", adminToken, http.StatusBadRequest, "invalid_deployment")
	checkError(t, e, http.MethodGet, "/v1/admin/sessions?cursor=zzz", "", adminToken, http.StatusBadRequest, "bad_cursor")
	checkError(t, e, http.MethodGet, "/v1/admin/sessions?state=active&cursor="+url.QueryEscape(first.Next), "", adminToken, http.StatusBadRequest, "bad_cursor")
	checkError(t, e, http.MethodGet, "/v1/admin/sessions", "", testToken, http.StatusUnauthorized, "unauthorized")
	checkError(t, e, http.MethodPost, "/v1/admin/index/rebuild", `{"x":1}`, adminToken, http.StatusBadRequest, "bad_request")
}

// TestIndexHealed: with every owner index write dropped (a failpoint) the
// index holds nothing; once that owner stopped, the reconciler of an
// owner of another deployment restores every entry; entries removed by
// hand come back with a rebuild, which one owner claims and runs.
func TestIndexHealed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	drop := func(c *pool.Config) {
		c.Failpoints = dropIndexWrites()
		c.IndexReconcileInterval = -1
	}
	stop1 := e.owner("v1", "p1", drop)
	var ids []string
	for range 3 {
		ids = append([]string{e.create(`{"text":"/ask who?"}`).SessionID}, ids...)
	}
	for _, id := range ids {
		e.eventually(10*time.Second, "waiting for input", func() bool { return e.status(id).Why == "input" })
	}
	if got := e.listIDs(""); len(got) != 0 {
		t.Fatalf("entries written despite the failpoint: %v", got)
	}
	stop1() // its share of the reconciling would be left undone
	stop := e.owner("v2", "p2", func(c *pool.Config) { c.IndexReconcileInterval = 200 * time.Millisecond })
	e.eventually(20*time.Second, "the reconciler restores every entry", func() bool {
		return sameSet(e.listIDs("waiting=input"), ids)
	})
	stop()
	x := e.index()
	for _, id := range ids {
		if err := x.Delete(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if _, _, err := x.Get(t.Context(), id); !errors.Is(err, record.ErrNotFound) {
			t.Fatalf("entry after delete: %v", err)
		}
	}
	if got := e.listIDs(""); len(got) != 0 {
		t.Fatalf("entries left after their removal: %v", got)
	}
	e.owner("v2", "p3", func(c *pool.Config) { c.IndexReconcileInterval = -1 }) // rebuilds only
	var rb ingress.IndexRebuildReply
	e.mustAdmin(http.MethodPost, "/v1/admin/index/rebuild", "", http.StatusAccepted, &rb)
	if rb.RebuildID == "" {
		t.Fatalf("rebuild reply %+v", rb)
	}
	e.eventually(20*time.Second, "the rebuild restores every entry", func() bool {
		return sameSet(e.listIDs("waiting=input"), ids)
	})
	// The rebuild recounted each one's storage: its events and their bytes;
	// and took its creation time from its first event, session.started.
	for _, id := range ids {
		started, err := x.FirstEventTime(t.Context(), id)
		e.h.Check(err)
		if got, _, err := x.Get(t.Context(), id); err != nil || started.IsZero() || !got.CreatedAt.Equal(started) {
			t.Fatalf("createdAt of %s after the rebuild: %v (%v), want session.started's %v", id, got.CreatedAt, err, started)
		}
		n, size, err := x.CountEvents(t.Context(), id)
		e.h.Check(err)
		got, _, err := x.Get(t.Context(), id)
		if err != nil || got.Storage == nil || got.Storage.Events != n || got.Storage.EventBytes != size || n != uint64(len(e.events(id, 0))) || size == 0 {
			t.Fatalf("storage of %s after the rebuild: %+v (%v), want %d events, %d bytes", id, got.Storage, err, n, size)
		}
	}
	req, _, err := x.Rebuild(t.Context())
	if err != nil || req.RebuildID != rb.RebuildID {
		t.Fatalf("rebuild request %+v %v", req, err)
	}
	e.eventually(10*time.Second, "the rebuild marked done", func() bool {
		req, _, err := x.Rebuild(t.Context())
		return err == nil && !req.DoneAt.IsZero() && req.Sessions >= 3 && req.ClaimedBy == "p3"
	})
}

// dropIndexWrites arms the failpoint that drops every owner write of the
// session index.
func dropIndexWrites() *failpoint.Registry {
	return failpoint.New().On(failpoint.BeforeIndexWrite, func(failpoint.Args) error { return errors.New("dropped") })
}

// index opens the session index.
func (e *env) index() *kv.Index {
	e.t.Helper()
	x, err := kv.OpenIndex(e.t.Context(), e.JS, e.Names)
	e.h.Check(err)
	return x
}

// TestListSessionsOverNATS: the listing on the admin subject answers what
// the HTTP route answers, refuses bad filters with the error headers, and
// a reply cut to a byte bound continues where it was cut.
func TestListSessionsOverNATS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	long := strings.Repeat("q", 3000)
	for range 4 {
		e.create(`{"text":"/ask ` + long + `"}`)
	}
	e.eventually(20*time.Second, "four waiting", func() bool { return len(e.listIDs("waiting=input")) == 4 })
	want := e.listIDs("waiting=input")
	msg, err := e.NC.Request(e.Names.Admin("sessions"), []byte(`{"waiting":"input","limit":10}`), 10*time.Second)
	e.h.Check(err)
	var got ingress.SessionList
	if err := json.Unmarshal(msg.Data, &got); err != nil {
		t.Fatalf("%v: %s", err, msg.Data)
	}
	ids := []string{}
	for _, s := range got.Sessions {
		ids = append(ids, s.SessionID)
	}
	if !slices.Equal(ids, want) || got.Next != "" || got.Sessions[0].WaitingFor[0].Question != long {
		t.Fatalf("over NATS: %v next %q, want %v", ids, got.Next, want)
	}
	bad, err := e.NC.Request(e.Names.Admin("sessions"), []byte(`{"waiting":"nap"}`), 10*time.Second)
	e.h.Check(err)
	if bad.Header.Get("Nats-Service-Error-Code") != "400" || !strings.Contains(string(bad.Data), "bad_request") {
		t.Fatalf("a bad filter over NATS: %v %s", bad.Header, bad.Data)
	}
	// Cut to fit two entries: the rest follows from next, none twice.
	lr := ingress.ListRequest{Waiting: "input", Limit: 10}
	full, err := e.ing.ListSessions(t.Context(), lr)
	e.h.Check(err)
	one, err := json.Marshal(full.Sessions[0])
	e.h.Check(err)
	b, err := full.Bounded(2*len(one) + 200)
	e.h.Check(err)
	var cut ingress.SessionList
	e.h.Check(json.Unmarshal(b, &cut))
	if len(cut.Sessions) != 2 || cut.Next == "" || len(b) > 2*len(one)+200 {
		t.Fatalf("cut to %d bytes: %d sessions, next %q", len(b), len(cut.Sessions), cut.Next)
	}
	lr.Cursor = cut.Next
	rest, err := e.ing.ListSessions(t.Context(), lr)
	e.h.Check(err)
	ids = []string{cut.Sessions[0].SessionID, cut.Sessions[1].SessionID}
	for _, s := range rest.Sessions {
		ids = append(ids, s.SessionID)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("cut and continued: %v, want %v", ids, want)
	}
}

// TestDrainReportFromIndex: the deployments view comes from the session
// index and the fleet: agent, promotion, live owners with their leases'
// expiry, advertised versions, totals by state; the sessions that are not
// idle with why — a hibernated one waiting for input among them — paged
// by index entries read, each listed once; the agents view counts by
// state from the index too.
func TestDrainReportFromIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1", func(c *pool.Config) { c.HibernateAfter = time.Hour })
	e.owner("v2", "p2", func(c *pool.Config) { c.HibernateAfter = 200 * time.Millisecond })
	plain := e.create(`{"text":"hello"}`).SessionID
	ask := e.create(`{"text":"/ask colour?"}`).SessionID
	paused := e.create(`{"text":"hello"}`).SessionID
	e.mustAdmin(http.MethodPost, "/v1/admin/sessions/"+paused+"/pause", "", http.StatusAccepted, nil)
	e.mustAdmin(http.MethodPost, "/v1/admin/agents/default/promote", `{"deploymentId":"v2"}`, http.StatusOK, nil)
	e.eventually(10*time.Second, "the ingress stamps v2", func() bool {
		var info ingress.IngressInfo
		e.mustGet("/v1/ingress", testToken, &info)
		return info.Stamps == "v2"
	})
	parked := e.create(`{"text":"/ask size?"}`).SessionID // created on v2, the promoted one
	if st := e.status(parked); st.DeploymentID != "v2" {
		t.Fatalf("created on %s, want v2", st.DeploymentID)
	}
	e.eventually(10*time.Second, "v2's session hibernated, waiting", func() bool {
		st := e.status(parked)
		return st.Why == "input" && st.State == "hibernated"
	})

	var v1, v2 ingress.DeploymentReport
	e.eventually(20*time.Second, "the report from the index", func() bool {
		rep := e.report("")
		v1, _ = depReport(rep, "v1")
		v2, _ = depReport(rep, "v2")
		return v1.Sessions["active"] == 2 && v1.Sessions["paused"] == 1 && len(v1.NotIdle) == 2 && v1.Idle == 1 &&
			v2.Sessions["hibernated"] == 1 && len(v2.NotIdle) == 1 && v2.NotIdle[0].State == "hibernated"
	})
	if v1.Agent != "default" || v1.Promoted || !v2.Promoted || len(v1.Owners) != 1 || v1.Owners[0].ProcessID != "p1" ||
		v1.Owners[0].LeaseExpiresAt == nil || !v1.Owners[0].LeaseExpiresAt.After(time.Now().Add(-time.Second)) ||
		!slices.Contains(v1.InboxVersions, 1) || !slices.Contains(v1.StateVersions, 1) {
		t.Fatalf("v1 = %+v, v2 = %+v", v1, v2)
	}
	// The owner's hint: a session hibernated in the run that created it
	// is indexed with every event it appended.
	e.eventually(10*time.Second, "the parked session's storage", func() bool {
		got, _, err := e.index().Get(t.Context(), parked)
		n, size, cerr := e.index().CountEvents(t.Context(), parked)
		return err == nil && cerr == nil && got.Storage != nil && got.Storage.Events == n && got.Storage.EventBytes == size && size > 0
	})
	why := map[string]string{}
	for _, r := range append(slices.Clone(v1.NotIdle), v2.NotIdle...) {
		why[r.SessionID] = r.Why
	}
	if why[ask] != "input" || why[paused] != "paused" || why[parked] != "input" || why[plain] != "" {
		t.Fatalf("not idle: %v", why)
	}
	// Pages of one entry read: every not-idle session once.
	seen := map[string]int{}
	after, pages := "", 0
	for {
		rep := e.report("?limit=1" + map[bool]string{true: "&after=" + after, false: ""}[after != ""])
		pages++
		for _, d := range rep.Deployments {
			for _, r := range d.NotIdle {
				seen[r.SessionID]++
			}
		}
		if rep.Scanned > 1 || pages > 50 {
			t.Fatalf("page %d read %d entries", pages, rep.Scanned)
		}
		if rep.Next == "" {
			break
		}
		after = rep.Next
	}
	if len(seen) != 3 || seen[ask] != 1 || seen[paused] != 1 || seen[parked] != 1 {
		t.Fatalf("paged not-idle sessions %v in %d pages", seen, pages)
	}
	var ag ingress.Agents
	e.mustGet("/v1/admin/agents", adminToken, &ag)
	if len(ag.Agents) != 1 || ag.Agents[0].Sessions["active"] != 2 || ag.Agents[0].Sessions["hibernated"] != 1 || ag.Agents[0].Sessions["paused"] != 1 {
		t.Fatalf("agents view: %+v", ag)
	}
}
