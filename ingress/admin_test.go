package ingress_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

const adminToken = "admin-token"

func (e *env) admin(method, path, body string) (int, []byte) {
	e.t.Helper()
	return e.call(method, path, body, adminToken)
}

// mustAdmin sends an admin request and decodes a success of status want.
func (e *env) mustAdmin(method, path, body string, want int, v any) {
	e.t.Helper()
	code, b := e.admin(method, path, body)
	if code != want {
		e.t.Fatalf("%s %s %s = %d %s, want %d", method, path, body, code, b, want)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			e.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// quiet waits until nothing durable changes for 300 ms (events are
// appended in the background after a session settles).
func (e *env) quiet() {
	e.t.Helper()
	prev := e.durable()
	e.eventually(10*time.Second, "no more writes", func() bool {
		time.Sleep(300 * time.Millisecond)
		cur := e.durable()
		same := equalDurable(prev, cur)
		prev = cur
		return same
	})
}

func (e *env) report(query string) ingress.DrainReport {
	e.t.Helper()
	var r ingress.DrainReport
	e.mustAdmin(http.MethodGet, "/v1/admin/deployments"+query, "", http.StatusOK, &r)
	return r
}

func depReport(r ingress.DrainReport, dep string) (ingress.DeploymentReport, bool) {
	i := slices.IndexFunc(r.Deployments, func(d ingress.DeploymentReport) bool { return d.DeploymentID == dep })
	if i < 0 {
		return ingress.DeploymentReport{}, false
	}
	return r.Deployments[i], true
}

// An operator move of an idle session runs the handoff to the target
// deployment's owner; force is refused until the source deployment is
// retired, and a move to a retired deployment is refused. Retirement is
// idempotent and shows in the drain report.
func TestAdminMoveAndRetire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	e.owner("v2", "p2")
	id := e.create(`{"alias":"mv-1","text":"hello"}`).SessionID
	e.eventually(10*time.Second, "an idle session", func() bool { return e.status(id).Idle })

	// force on a session of a deployment that is not retired: 409, nothing written.
	e.quiet()
	before := e.durable()
	checkError(t, e, http.MethodPost, "/v1/admin/sessions/"+id+"/move", `{"deploymentId":"v2","force":true}`, adminToken, http.StatusConflict, "not_retired")
	if after := e.durable(); !equalDurable(before, after) {
		t.Fatalf("a refused move wrote: %v -> %v", before, after)
	}

	var mv ingress.MoveReceipt
	e.mustAdmin(http.MethodPost, "/v1/admin/sessions/"+id+"/move", `{"deploymentId":"v2"}`, http.StatusAccepted, &mv)
	if mv.SessionID != id || mv.Seq == 0 || mv.TargetDeploymentID != "v2" || mv.FromDeploymentID != "v1" || mv.Force || mv.DeploymentID != "v1" {
		t.Fatalf("move = %+v", mv)
	}
	evs := e.waitEvents(id, "handoff.completed to v2", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventHandoffCompleted) == 1 })
	hc := harness.LastData[wire.HandoffCompleted](t, evs, wire.EventHandoffCompleted)
	if hc.FromDeploymentID != "v1" || hc.ToDeploymentID != "v2" {
		t.Fatalf("handoff.completed = %+v", hc)
	}
	e.eventually(10*time.Second, "the session on v2", func() bool {
		cur, err := e.Store.LeaderSession(t.Context(), id)
		return err == nil && cur.Record.DeploymentID == "v2" && cur.Record.OwnerProcess == "p2" && cur.Record.Epoch >= 2
	})
	// The move command itself is applied (by the target, after
	// handoff.completed), stamped as an operator command.
	isMove := func(a wire.CommandApplied) bool { return a.Kind == string(wire.KindMove) }
	e.waitEvents(id, "the move command applied", func(evs []wire.Event) bool { return slices.ContainsFunc(applied(t, evs), isMove) })
	// A move to where it is: 409 same_deployment.
	checkError(t, e, http.MethodPost, "/v1/admin/sessions/"+id+"/move", `{"deployment":"v2"}`, adminToken, http.StatusConflict, "same_deployment")

	// Retire v2: idempotent; the report shows it.
	var r1, r2 ingress.Retired
	e.mustAdmin(http.MethodPost, "/v1/admin/deployments/v2/retire", ``, http.StatusOK, &r1)
	e.mustAdmin(http.MethodPost, "/v1/admin/deployments/v2/retire", `{}`, http.StatusOK, &r2)
	if !r1.Retired || !r1.Changed || r1.RetiredAt.IsZero() || r2.Changed || !r2.Retired || !r2.RetiredAt.Equal(r1.RetiredAt) {
		t.Fatalf("retire twice = %+v, %+v", r1, r2)
	}
	if ok, err := e.Store.DeploymentRetired(t.Context(), "v2"); err != nil || !ok {
		t.Fatalf("v2 not retired in KV: %v %v", ok, err)
	}
	// A move to a retired deployment: 409 target_retired.
	other := e.create(`{"text":"second"}`).SessionID
	e.eventually(10*time.Second, "an idle second session", func() bool { return e.status(other).Idle })
	checkError(t, e, http.MethodPost, "/v1/admin/sessions/"+other+"/move", `{"deploymentId":"v2"}`, adminToken, http.StatusConflict, "target_retired")

	// The session on the retired v2 may be moved with force.
	e.eventually(10*time.Second, "an idle moved session", func() bool { return e.status(id).Idle })
	e.mustAdmin(http.MethodPost, "/v1/admin/sessions/"+id+"/move", `{"deploymentId":"v1","force":true}`, http.StatusAccepted, &mv)
	if !mv.Force || mv.FromDeploymentID != "v2" || mv.TargetDeploymentID != "v1" {
		t.Fatalf("forced move = %+v", mv)
	}
	e.waitEvents(id, "a second handoff", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventHandoffCompleted) == 2 })
	e.eventually(10*time.Second, "the session back on v1", func() bool {
		cur, err := e.Store.LeaderSession(t.Context(), id)
		return err == nil && cur.Record.DeploymentID == "v1" && cur.Record.OwnerProcess == "p1"
	})

	// The report counts from the session index's postings, which an owner
	// writes after the record: the move's new posting goes before the
	// entry and the stale one (v2's) after it, so the counts reach the
	// record's state a moment after it (docs/architecture.md, invariant 15).
	var rep ingress.DrainReport
	settled := func() bool {
		rep = e.report("")
		v1, ok1 := depReport(rep, "v1")
		v2, ok2 := depReport(rep, "v2")
		return ok1 && ok2 && v2.Retired && v2.RetiredAt != nil && !v1.Retired && rep.Scanned == 2 && rep.Next == "" &&
			v1.Sessions["active"] == 2 && v2.Sessions["active"] == 0
	}
	deadline := time.Now().Add(10 * time.Second)
	for !settled() {
		if time.Now().After(deadline) {
			t.Fatalf("report after 10s = %+v", rep)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Pause holds deliveries (no turn starts) until resume; the drain report
// says why the session is not idle. Paging the report is bounded by limit.
func TestAdminPauseResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"pz-1","text":"hello"}`).SessionID
	idle := e.create(`{"text":"idle one"}`).SessionID
	e.eventually(10*time.Second, "idle sessions", func() bool { return e.status(id).Idle && e.status(idle).Idle })

	var rc ingress.Receipt
	e.mustAdmin(http.MethodPost, "/v1/admin/sessions/"+id+"/pause", ``, http.StatusAccepted, &rc)
	if rc.SessionID != id || rc.Seq == 0 {
		t.Fatalf("pause = %+v", rc)
	}
	e.waitEvents(id, "session.paused", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventSessionPaused) == 1 })
	e.eventually(10*time.Second, "state paused", func() bool { return e.status(id).State == string(record.StatePaused) })

	e.deliver(`{"alias":"pz-1","text":"while paused"}`)
	time.Sleep(time.Second) // the owner has had every chance to run it
	if slices.Contains(harness.Outputs(e.events(id, 0)), "while paused") {
		t.Fatal("a delivery ran while the session was paused")
	}
	rep := e.report("")
	v1, ok := depReport(rep, "v1")
	if !ok || v1.Sessions["paused"] != 1 || v1.Sessions["active"] != 1 || v1.Idle != 1 || len(v1.NotIdle) != 1 ||
		v1.NotIdle[0].SessionID != id || v1.NotIdle[0].Why != "paused" || v1.NotIdle[0].OwnerProcess != "p1" {
		t.Fatalf("report while paused = %+v", rep)
	}
	// Paging: one session per page, in ID order, then no next.
	first := e.report("?limit=1")
	if first.Scanned != 1 || first.Next == "" {
		t.Fatalf("first page = %+v", first)
	}
	second := e.report("?limit=1&after=" + first.Next)
	if second.Scanned != 1 || second.Next != "" {
		t.Fatalf("second (last) page = %+v", second)
	}
	if whole := e.report("?limit=2"); whole.Scanned != 2 || whole.Next != "" {
		t.Fatalf("one page of two = %+v", whole)
	}
	if past := e.report("?after=" + first.Next + "&limit=5"); past.Scanned != 1 {
		t.Fatalf("page after %s = %+v", first.Next, past)
	}

	// A move while paused is not idle: skipped with reason paused, the
	// session stays.
	e.mustAdmin(http.MethodPost, "/v1/admin/sessions/"+id+"/move", `{"deploymentId":"v2"}`, http.StatusAccepted, nil)
	evs := e.waitEvents(id, "handoff.skipped", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventHandoffSkipped) == 1 })
	if sk := harness.LastData[wire.HandoffSkipped](t, evs, wire.EventHandoffSkipped); sk.Reason != wire.SkipPaused || sk.TargetDeploymentID != "v2" {
		t.Fatalf("handoff.skipped = %+v", sk)
	}
	if st := e.status(id); st.DeploymentID != "v1" || st.Epoch != 1 {
		t.Fatalf("a skipped move moved the session: %+v", st)
	}

	e.mustAdmin(http.MethodPost, "/v1/admin/sessions/"+id+"/resume", `{"caller":"ops"}`, http.StatusAccepted, &rc)
	e.waitEvents(id, "the held delivery after resume", func(evs []wire.Event) bool {
		return harness.Count(evs, wire.EventSessionResumed) == 1 && slices.Contains(harness.Outputs(evs), "while paused")
	})
	e.eventually(10*time.Second, "idle again", func() bool { st := e.status(id); return st.Idle && st.State == "active" })
}

// Release clears a session's owner by a CAS at the leader's revision and
// wakes the pool: a process of the deployment claims it (epoch+1) and it
// keeps serving, each delivery answered once.
func TestAdminRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	e.owner("v1", "p2")
	id := e.create(`{"alias":"rl-1","text":"hello"}`).SessionID
	e.eventually(10*time.Second, "an idle session", func() bool { return e.status(id).Idle })
	cur, err := e.Store.LeaderSession(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	var rel ingress.Released
	e.mustAdmin(http.MethodPost, "/v1/admin/sessions/"+id+"/release", ``, http.StatusOK, &rel)
	if rel.SessionID != id || rel.FromProcess != cur.Record.OwnerProcess || rel.Epoch != cur.Record.Epoch || rel.Revision <= cur.Revision {
		t.Fatalf("release = %+v (record before: %+v at %d)", rel, cur.Record, cur.Revision)
	}
	if rel.WakeOutcome != "loaded" || rel.WakeProcess == "" {
		t.Fatalf("release wake = %+v", rel)
	}
	e.eventually(10*time.Second, "a new claim", func() bool {
		now, err := e.Store.LeaderSession(t.Context(), id)
		return err == nil && now.Record.OwnerProcess == rel.WakeProcess && now.Record.Epoch == cur.Record.Epoch+1
	})
	e.deliver(`{"alias":"rl-1","text":"after release"}`)
	e.waitEvents(id, "the answer after release", func(evs []wire.Event) bool { return slices.Contains(harness.Outputs(evs), "after release") })
	time.Sleep(500 * time.Millisecond)
	evs := e.events(id, 0)
	n := 0
	for _, o := range harness.Outputs(evs) {
		if o == "after release" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the delivery after release was answered %d times", n)
	}
	contiguous(t, evs, 0)
}

// Admin refusals: status, code, and nothing durable written.
func TestAdminBadInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	live := e.create(`{"text":"hi"}`).SessionID
	gone := e.create(`{"text":"/done"}`).SessionID
	e.eventually(10*time.Second, "the ended session", func() bool { return e.status(gone).State == string(record.StateEnded) })
	e.eventually(10*time.Second, "an idle live session", func() bool { return e.status(live).Idle })
	e.quiet()
	unknown := "01JZZZZZZZZZZZZZZZZZZZZZZZ"
	const post, get = http.MethodPost, http.MethodGet
	s := "/v1/admin/sessions/"
	type row struct {
		name         string
		method, path string
		body, token  string // token "-": none
		status       int
		code         string
	}
	rows := []row{
		{"no token", get, "/v1/admin/deployments", ``, "-", 401, "unauthorized"},
		{"user token", get, "/v1/admin/deployments", ``, testToken, 401, "unauthorized"},
		{"wrong token on move", post, s + live + "/move", `{"deploymentId":"v2"}`, "admin-tokeN", 401, "unauthorized"},
		{"no token on retire", post, "/v1/admin/deployments/v1/retire", ``, "-", 401, "unauthorized"},
		{"no token on release", post, s + live + "/release", ``, "-", 401, "unauthorized"},
		{"move: no deployment", post, s + live + "/move", `{}`, "", 400, "bad_request"},
		{"move: empty body", post, s + live + "/move", ``, "", 400, "bad_request"},
		{"move: both names", post, s + live + "/move", `{"deploymentId":"v2","deployment":"v2"}`, "", 400, "bad_request"},
		{"move: invalid deployment", post, s + live + "/move", `{"deploymentId":"a.b"}`, "", 400, "invalid_deployment"},
		{"move: latest", post, s + live + "/move", `{"deploymentId":"latest"}`, "", 400, "invalid_deployment"},
		{"move: unknown field", post, s + live + "/move", `{"deploymentId":"v2","now":true}`, "", 400, "bad_request"},
		{"move: force of the wrong type", post, s + live + "/move", `{"deploymentId":"v2","force":"yes"}`, "", 400, "bad_request"},
		{"move: unknown session", post, s + unknown + "/move", `{"deploymentId":"v2"}`, "", 404, "session_not_found"},
		{"move: ended session", post, s + gone + "/move", `{"deploymentId":"v2"}`, "", 410, "session_ended"},
		{"move: malformed session ID", post, s + "a.b/move", `{"deploymentId":"v2"}`, "", 400, "bad_request"},
		{"move: to its own deployment", post, s + live + "/move", `{"deploymentId":"v1"}`, "", 409, "same_deployment"},
		{"move: force, not retired", post, s + live + "/move", `{"deploymentId":"v2","force":true}`, "", 409, "not_retired"},
		{"pause: unknown session", post, s + unknown + "/pause", ``, "", 404, "session_not_found"},
		{"pause: ended session", post, s + gone + "/pause", ``, "", 410, "session_ended"},
		{"pause: unknown field", post, s + live + "/pause", `{"force":true}`, "", 400, "bad_request"},
		{"resume: unknown session", post, s + unknown + "/resume", ``, "", 404, "session_not_found"},
		{"resume: malformed JSON", post, s + live + "/resume", `{`, "", 400, "bad_request"},
		{"release: unknown session", post, s + unknown + "/release", ``, "", 404, "session_not_found"},
		{"release: ended session", post, s + gone + "/release", ``, "", 410, "session_ended"},
		{"release: unknown field", post, s + live + "/release", `{"deploymentId":"v1"}`, "", 400, "bad_request"},
		{"retire: invalid deployment", post, "/v1/admin/deployments/a%2Eb/retire", ``, "", 400, "invalid_deployment"},
		{"retire: latest", post, "/v1/admin/deployments/latest/retire", ``, "", 400, "invalid_deployment"},
		{"retire: a body", post, "/v1/admin/deployments/v1/retire", `{"force":true}`, "", 400, "bad_request"},
		{"report: bad limit", get, "/v1/admin/deployments?limit=0", ``, "", 400, "bad_request"},
		{"report: limit too large", get, "/v1/admin/deployments?limit=5001", ``, "", 400, "bad_request"},
		{"report: bad after", get, "/v1/admin/deployments?after=a.b", ``, "", 400, "bad_request"},
		{"report: unknown parameter", get, "/v1/admin/deployments?page=2", ``, "", 400, "bad_request"},
		{"unknown admin route", post, "/v1/admin/explode", ``, "", 404, "not_found"},
		{"wrong method", post, "/v1/admin/deployments", ``, "", 405, "method_not_allowed"},
	}
	for _, r := range rows {
		token := adminToken
		switch r.token {
		case "-":
			token = ""
		case "":
		default:
			token = r.token
		}
		before := e.durable()
		status, b := e.call(r.method, r.path, r.body, token)
		var eb ingress.ErrorBody
		err := json.Unmarshal(b, &eb)
		if status != r.status || err != nil || eb.Error.Code != r.code || eb.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d %s", r.name, status, clipped(b), r.status, r.code)
			continue
		}
		if after := e.durable(); !equalDurable(before, after) {
			t.Errorf("%s: a refused request wrote: %v -> %v", r.name, before, after)
		}
	}
	// Nothing retired, the live session untouched.
	if ids, err := e.Store.RetiredDeployments(t.Context()); err != nil || len(ids) != 0 {
		t.Fatalf("retired deployments after refusals: %v %v", ids, err)
	}
	if st := e.status(live); st.State != "active" || st.Epoch != 1 {
		t.Fatalf("live session after refusals: %+v", st)
	}
	checkAdminMetrics(t, e)
}

// Without admin tokens the admin routes are disabled: 403 admin_disabled
// whatever the token.
func TestAdminDisabled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ingress.Config) { c.AdminTokens = nil })
	for _, tok := range []string{"", testToken, adminToken} {
		checkError(t, e, http.MethodGet, "/v1/admin/deployments", "", tok, http.StatusForbidden, "admin_disabled")
		checkError(t, e, http.MethodPost, "/v1/admin/deployments/v1/retire", "", tok, http.StatusForbidden, "admin_disabled")
	}
}

// The admin routes are counted by route and status like every route.
func checkAdminMetrics(t *testing.T, e *env) {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "baton_ingress_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var route, status string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "route":
					route = l.GetValue()
				case "status":
					status = l.GetValue()
				}
			}
			seen[route+" "+status] = true
		}
	}
	for _, want := range []string{
		"POST /v1/admin/sessions/{id}/move 409", "POST /v1/admin/sessions/{id}/move 404",
		"GET /v1/admin/deployments 401", "POST /v1/admin/deployments/{dep}/retire 400",
		"POST /v1/admin/sessions/{id}/release 410", "/v1/admin/ 404",
	} {
		if !seen[want] {
			t.Errorf("no request metric %q (have %v)", want, seen)
		}
	}
}

// With one process in the pool, the released process itself claims the
// session afresh once it let go (the release deletes its consumer, so it
// notices at once; a wake it answers "running" meanwhile is retried).
func TestAdminReleaseOneProcess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"rl-solo","text":"hello"}`).SessionID
	e.eventually(10*time.Second, "an idle session", func() bool { return e.status(id).Idle })
	var rel ingress.Released
	e.mustAdmin(http.MethodPost, "/v1/admin/sessions/"+id+"/release", `{"caller":"ops"}`, http.StatusOK, &rel)
	if rel.FromProcess != "p1" || rel.WakeOutcome != "loaded" || rel.WakeProcess != "p1" {
		t.Fatalf("release = %+v", rel)
	}
	e.eventually(10*time.Second, "the new claim", func() bool {
		cur, err := e.Store.LeaderSession(t.Context(), id)
		return err == nil && cur.Record.OwnerProcess == "p1" && cur.Record.Epoch == rel.Epoch+1
	})
	e.deliver(`{"alias":"rl-solo","text":"still here"}`)
	e.waitEvents(id, "the answer", func(evs []wire.Event) bool { return slices.Contains(harness.Outputs(evs), "still here") })
}
