//go:build upgrade

package upgrade

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/oldbuild"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/wire"
)

const (
	// pinReadsState is the newest checkpoint state version the previous
	// build (oldbuild.Pin) reads; pinReadsInbox its newest inbox version.
	pinReadsState = 4
	pinReadsInbox = 1
	// wait bounds every poll: generous, for two test runs at once on two
	// cores.
	wait = 60 * time.Second
	// leaseTTL is the owners' lease TTL.
	leaseTTL   = 5 * time.Second
	adminToken = "op-upgrade"
)

// fleet is the running topology: one NATS server, blue (the previous
// build) and green (this build), each an owner process and an ingress.
type fleet struct {
	t      *testing.T
	env    *harness.Env
	client harness.Client
	blue   string // blue's ingress base URL
	green  string // green's ingress base URL
	admin  harness.Option
}

func TestMixedBuilds(t *testing.T) {
	ctx := t.Context()
	f := start(t)

	// Upgrade: sessions created on blue move to green through green's
	// ingress, keeping their ID, stream and cursor.
	var ids []string
	for i, alias := range []string{"up.1", "up.2"} {
		rc := f.deliver(f.blue, alias, "hello "+alias)
		if !rc.Created || rc.DeploymentID != "blue" {
			t.Fatalf("delivery %d through blue: %+v, want a new session stamped blue", i, rc)
		}
		f.output(rc.SessionID, "hello "+alias, "blue")
		ids = append(ids, rc.SessionID)
	}
	for i, id := range ids {
		alias := []string{"up.1", "up.2"}[i]
		rc := f.deliver(f.green, alias, "upgraded "+alias)
		if rc.SessionID != id || rc.DeploymentID != "green" {
			t.Fatalf("delivery through green: %+v, want session %s stamped green", rc, id)
		}
		f.output(id, "upgraded "+alias, "green")
		f.onDeployment(id, "green")
		t.Logf("upgrade: session %s (%s) created on blue, moved to green by a delivery through green's ingress", id, alias)
	}

	// A session that used something blue cannot read: a parent whose
	// closed handle keeps its checkpoint at state version 5.
	parent := f.deliver(f.green, "up.parent", "/spawn r child work").SessionID
	f.waitEvents(parent, "the child's result", func(evs []wire.Event) bool {
		return harness.Count(evs, "child.completed") == 1 && harness.Count(evs, "session.waiting") >= 1 && last(evs) == "session.waiting"
	})
	f.deliver(f.green, "up.parent", "/close r")
	f.waitEvents(parent, "the closed handle", func(evs []wire.Event) bool {
		return harness.Count(evs, "child.closed") == 1 && last(evs) == "session.waiting"
	})
	v := f.stateV(parent)
	if v <= pinReadsState {
		t.Fatalf("the parent's checkpoint is at state version %d: the previous build reads it (want > %d)", v, pinReadsState)
	}
	t.Logf("a parent with a closed handle, session %s on green: checkpoint at state version %d (blue reads 1 to %d)", parent, v, pinReadsState)

	// Tags: a session created on green with tags keeps them in a
	// checkpoint blue cannot read (state version 7).
	taggedID := f.create(f.green, `{"alias":"up.tagged","text":"tagged hello","tags":{"tenant":"acme"}}`)
	f.output(taggedID, "tagged hello", "green")
	f.waitEvents(taggedID, "settled", func(evs []wire.Event) bool { return last(evs) == "session.waiting" })
	const tagsState = 7
	if v := f.stateV(taggedID); v <= pinReadsState || v != tagsState {
		t.Fatalf("the tagged session's checkpoint is at state version %d, want %d", v, tagsState)
	}
	t.Logf("a tagged session, %s on green: checkpoint at state version %d", taggedID, tagsState)

	// A user's end (inbox version 4, state version 8): a session on green
	// ended through green's ingress while its step runs.
	endedID := f.create(f.green, `{"alias":"up.ended","text":"/sleep 1h"}`)
	f.waitEvents(endedID, "the step running", func(evs []wire.Event) bool { return harness.Count(evs, "turn.started") == 1 })
	if err := f.client.Call(ctx, http.MethodPost, f.green+"/v1/sessions/"+endedID+"/end", json.RawMessage(`{"message":"done here"}`),
		http.StatusAccepted, nil); err != nil {
		t.Fatalf("end through green: %v", err)
	}
	evs := f.waitEvents(endedID, "session.ended", func(evs []wire.Event) bool { return last(evs) == wire.EventSessionEnded })
	if e := evs[len(evs)-1]; e.V != 4 || string(e.Data) != `{"by":"user","message":"done here","reason":"terminated"}` {
		t.Fatalf("session.ended v%d %s", e.V, e.Data)
	}
	if v := f.stateV(endedID); v != wire.EndStateVersion {
		t.Fatalf("the ended session's checkpoint is at state version %d, want %d", v, wire.EndStateVersion)
	}
	t.Logf("a user's end on green: session %s ended by user, checkpoint at state version %d", endedID, wire.EndStateVersion)

	// Busy modes (inbox version 5): refused for blue, accepted on green.
	busyID := f.busyModes()

	// A delete beside blue's owners, which serve baton.finish too (and
	// know no delete: one they answer is refused and asked again): green's
	// owner carries it out; both builds' ingresses answer 410 for the
	// deleted session's alias, green's 410 deleted for its ID.
	f.deleted(endedID, "up.ended")

	// Rollback: blue promoted again (this build's admin route; blue's
	// owners never advertised their versions). A session that uses nothing
	// new moves back to blue; its trigger is encoded at the inbox version
	// blue reads.
	var p ingress.Promoted
	if err := harness.Retry(ctx, wait, 100*time.Millisecond, notFound, func() error {
		return f.client.Call(ctx, http.MethodPost, f.green+"/v1/admin/agents/default/promote",
			map[string]string{"deploymentId": "blue"}, http.StatusOK, &p, f.admin)
	}); err != nil {
		t.Fatalf("promote blue: %v", err)
	}
	// Ingresses follow a promotion by a KV watch (docs/api.md): green's
	// stamps blue once GET /v1/ingress says it follows this promotion.
	if err := harness.Poll(ctx, wait, func() bool {
		var info ingress.IngressInfo
		err := f.client.Call(ctx, http.MethodGet, f.green+"/v1/ingress", nil, http.StatusOK, &info)
		return err == nil && info.Stamps == "blue" && info.PromotionRevision == p.Revision
	}); err != nil {
		t.Fatalf("green's ingress does not follow the promotion of blue: %v", err)
	}
	stored := f.watchInbox("rolled back")
	rc := f.deliver(f.green, "up.1", "rolled back")
	if rc.SessionID != ids[0] || rc.DeploymentID != "blue" {
		t.Fatalf("delivery after the rollback: %+v, want %s stamped blue", rc, ids[0])
	}
	f.output(ids[0], "rolled back", "blue")
	f.onDeployment(ids[0], "blue")
	if v := stored(); v != pinReadsInbox {
		t.Fatalf("the rollback's trigger is stored at inbox version %d, want %d (blue's)", v, pinReadsInbox)
	}
	t.Logf("rollback: blue promoted (revision %d); session %s moved back to blue, its trigger (inbox seq %d) stored at version %d", p.Revision, ids[0], rc.Seq, pinReadsInbox)

	// Tags for blue, through green's ingress (which stamps blue now):
	// refused with 422 tags_unsupported naming blue, never dropped —
	// nothing is created, nothing is published.
	f.tagsRefused(ids[0])

	// A user's end of a session blue owns, through green's ingress: 422
	// unsupported_command naming blue (it reads inbox version 1), nothing
	// sent — the session lives on and answers the next delivery.
	f.endRefused(ids[0])

	// The parent's rollback is refused by blue's candidate before
	// activation: green keeps the session and applies the delivery.
	rc = f.deliver(f.green, "up.parent", "stay on green")
	evs = f.output(parent, "stay on green", "green")
	failed, ok := harness.Find(evs, harness.IsKind("handoff.failed"))
	if !ok || !strings.Contains(string(failed.Data), "unsupported checkpoint state version") ||
		!strings.Contains(string(failed.Data), `"targetDeploymentId":"blue"`) {
		t.Fatalf("no handoff.failed naming the state version blue cannot read:\n%s", harness.Trace(evs))
	}
	if n := harness.Count(evs, "handoff.completed"); n != 0 {
		t.Fatalf("the parent moved %d times", n)
	}
	f.onDeployment(parent, "green")
	t.Logf("refused rollback: session %s stays on green and answered the delivery; handoff.failed %s", parent, failed.Data)

	// A session that used a busy mode is refused the same way.
	f.busyRollbackRefused(busyID)

	// The tagged session's rollback is refused the same way: it stays on
	// green with its tags.
	f.deliver(f.green, "up.tagged", "tagged stays")
	evs = f.output(taggedID, "tagged stays", "green")
	if failed, ok := harness.Find(evs, harness.IsKind("handoff.failed")); !ok ||
		!strings.Contains(string(failed.Data), "unsupported checkpoint state version (checkpoint stateV=7)") {
		t.Fatalf("no handoff.failed naming state version 7:\n%s", harness.Trace(evs))
	}
	f.onDeployment(taggedID, "green")
	var st ingress.Status
	if err := f.client.Call(ctx, http.MethodGet, f.green+"/v1/sessions/"+taggedID, nil, http.StatusOK, &st); err != nil || st.Tags["tenant"] != "acme" {
		t.Fatalf("status of the tagged session: %+v %v", st.Tags, err)
	}
	t.Logf("refused rollback of a tagged session: %s stays on green with tags %v", taggedID, st.Tags)
	for _, id := range append(ids, parent, taggedID, busyID) {
		f.contiguous(id)
	}
}

// start builds both builds' binaries and starts NATS, blue, then green.
func start(t *testing.T) *fleet {
	t.Helper()
	ctx := t.Context()
	old, err := oldbuild.Build(ctx, repoRoot(t), oldbuild.Pin)
	if err != nil {
		t.Fatal(err)
	}
	how := "cached"
	if old.Built {
		how = "built"
	}
	t.Logf("previous build %s: %s in %s", old.Commit[:12], how, old.Took.Round(time.Millisecond))
	owner, ing := proctest.BuildNoRace(t, harness.OwnerPkg), proctest.BuildNoRace(t, harness.IngressPkg)

	srv, err := harness.StartServer(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	env, err := harness.Dial(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	dir := t.TempDir()
	adminFile := filepath.Join(dir, "admin-token")
	if err := os.WriteFile(adminFile, []byte(adminToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, env: env, admin: harness.Bearer(adminToken)}
	procs := harness.NewProcs(t, 60)
	for _, d := range []struct{ dep, owner, ingress string }{{"blue", old.Owner, old.Ingress}, {"green", owner, ing}} {
		procs.Start(t, d.dep+" owner", d.owner, harness.OwnerFlags(srv.URL(), d.dep, d.dep+"-1", dir, leaseTTL)...)
		addr, err := harness.FreeAddr()
		if err != nil {
			t.Fatal(err)
		}
		procs.Start(t, d.dep+" ingress", d.ingress, harness.IngressFlags(srv.URL(), d.dep, addr, "--insecure-dev", "--admin-token-file", adminFile)...)
		base := "http://" + addr
		wctx, cancel := context.WithTimeout(ctx, wait)
		err = f.client.WaitReady(wctx, base, 50*time.Millisecond)
		cancel()
		if err != nil {
			t.Fatalf("%s ingress: %v", d.dep, err)
		}
		if d.dep == "blue" {
			f.blue = base
			if err := env.OpenStore(ctx); err != nil { // blue's owner made the topology
				t.Fatal(err)
			}
		} else {
			f.green = base
		}
	}
	return f
}

// create posts body to POST /v1/sessions through the ingress at base and
// returns the new session's ID.
func (f *fleet) create(base, body string) string {
	f.t.Helper()
	var c ingress.Created
	err := harness.Retry(f.t.Context(), wait, 100*time.Millisecond, harness.Unavailable, func() error {
		return f.client.Call(f.t.Context(), http.MethodPost, base+"/v1/sessions", json.RawMessage(body), http.StatusCreated, &c)
	})
	if err != nil {
		f.t.Fatalf("create %s through %s: %v", body, base, err)
	}
	return c.SessionID
}

// tagsRefused checks that green's ingress, stamping blue, refuses tags
// for blue — a new session with tags (create, and a delivery that would
// create), and a PATCH of session onBlue, which blue owns — with 422
// tags_unsupported naming blue, and that nothing was written.
func (f *fleet) tagsRefused(onBlue string) {
	f.t.Helper()
	ctx := f.t.Context()
	before, err := f.env.Events(ctx, onBlue)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/sessions", `{"alias":"up.tags.refused","tags":{"tenant":"acme"}}`},
		{http.MethodPost, "/v1/deliveries", `{"alias":"up.tags.refused","text":"hi","tags":{"tenant":"acme"}}`},
		{http.MethodPatch, "/v1/sessions/" + onBlue, `{"tags":{"tenant":"acme"}}`},
	} {
		err := f.client.Call(ctx, c.method, f.green+c.path, json.RawMessage(c.body), http.StatusAccepted, nil)
		var se *harness.StatusError
		if !errors.As(err, &se) || se.Code != http.StatusUnprocessableEntity ||
			!strings.Contains(se.Body, `"code":"tags_unsupported"`) || !strings.Contains(se.Body, "deployment blue") {
			f.t.Fatalf("%s %s %s through green (stamping blue): %v, want 422 tags_unsupported naming blue", c.method, c.path, c.body, err)
		}
		f.t.Logf("%s %s %s → 422 %s", c.method, c.path, c.body, strings.TrimSpace(se.Body))
	}
	err = f.client.Call(ctx, http.MethodGet, f.green+"/v1/sessions?alias=up.tags.refused", nil, http.StatusOK, nil)
	if se := (*harness.StatusError)(nil); !errors.As(err, &se) || se.Code != http.StatusNotFound {
		f.t.Fatalf("a refused start created a session: %v", err)
	}
	after, err := f.env.Events(ctx, onBlue)
	if err != nil {
		f.t.Fatal(err)
	}
	if len(after) != len(before) {
		f.t.Fatalf("the refused PATCH changed session %s: %d events → %d", onBlue, len(before), len(after))
	}
	var st ingress.Status
	if err := f.client.Call(ctx, http.MethodGet, f.green+"/v1/sessions/"+onBlue, nil, http.StatusOK, &st); err != nil {
		f.t.Fatal(err)
	}
	if len(st.Tags) != 0 || st.QueueDepth != 0 {
		f.t.Fatalf("after the refused PATCH: tags %v, queueDepth %d", st.Tags, st.QueueDepth)
	}
}

// endRefused checks that green's ingress refuses the user's end of
// session onBlue, which blue owns and whose owners read no terminate
// (inbox version 4): 422 unsupported_command naming blue, nothing
// published, the session still live.
func (f *fleet) endRefused(onBlue string) {
	f.t.Helper()
	ctx := f.t.Context()
	before, err := f.env.Events(ctx, onBlue)
	if err != nil {
		f.t.Fatal(err)
	}
	err = f.client.Call(ctx, http.MethodPost, f.green+"/v1/sessions/"+onBlue+"/end", json.RawMessage(`{"message":"bye"}`), http.StatusAccepted, nil)
	var se *harness.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusUnprocessableEntity ||
		!strings.Contains(se.Body, `"code":"unsupported_command"`) || !strings.Contains(se.Body, "deployment blue") {
		f.t.Fatalf("end of %s through green (stamping blue): %v, want 422 unsupported_command naming blue", onBlue, err)
	}
	f.t.Logf("POST /v1/sessions/%s/end → 422 %s", onBlue, strings.TrimSpace(se.Body))
	after, err := f.env.Events(ctx, onBlue)
	if err != nil {
		f.t.Fatal(err)
	}
	var st ingress.Status
	if err := f.client.Call(ctx, http.MethodGet, f.green+"/v1/sessions/"+onBlue, nil, http.StatusOK, &st); err != nil {
		f.t.Fatal(err)
	}
	if len(after) != len(before) || st.State == "ended" || st.QueueDepth != 0 {
		f.t.Fatalf("the refused end changed session %s: %d events → %d, state %s, queueDepth %d", onBlue, len(before), len(after), st.State, st.QueueDepth)
	}
}

// repoRoot is the repository under test.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("the upgrade test runs in a git clone of the repository: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// deliver posts a delivery to alias through the ingress at base; an
// answer of 503 (no owner yet) is tried again.
func (f *fleet) deliver(base, alias, text string) ingress.Receipt {
	f.t.Helper()
	var rc ingress.Receipt
	err := harness.Retry(f.t.Context(), wait, 100*time.Millisecond, harness.Unavailable, func() error {
		return f.client.Call(f.t.Context(), http.MethodPost, base+"/v1/deliveries",
			map[string]string{"alias": alias, "text": text}, http.StatusAccepted, &rc)
	})
	if err != nil {
		f.t.Fatalf("deliver %q to %s through %s: %v", text, alias, base, err)
	}
	return rc
}

// output waits until the session's stream holds text's message.output,
// committed by an owner of dep, and returns the stream.
func (f *fleet) output(id, text, dep string) []wire.Event {
	f.t.Helper()
	return f.waitEvents(id, "output "+text+" by "+dep, func(evs []wire.Event) bool {
		ev, ok := harness.Find(evs, harness.IsOutput(text))
		return ok && ev.DeploymentID == dep
	})
}

func (f *fleet) waitEvents(id, what string, pred func([]wire.Event) bool) []wire.Event {
	f.t.Helper()
	evs, err := f.env.WaitEvents(f.t.Context(), id, wait, what, pred)
	if err != nil {
		f.t.Fatal(err)
	}
	return evs
}

// onDeployment checks the session's record is on dep.
func (f *fleet) onDeployment(id, dep string) {
	f.t.Helper()
	cur, err := f.env.Store.GetSession(f.t.Context(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	if cur.Record.DeploymentID != dep {
		f.t.Fatalf("session %s: record on %s (last handoff %+v), want %s", id, cur.Record.DeploymentID, cur.Record.Handoff, dep)
	}
}

// stateV is the state version of the session's committed checkpoint.
func (f *fleet) stateV(id string) int {
	f.t.Helper()
	cur, err := f.env.Store.GetSession(f.t.Context(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	var head struct {
		StateV int `json:"stateV"`
	}
	if err := json.Unmarshal(cur.Record.Checkpoint, &head); err != nil {
		f.t.Fatal(err)
	}
	return head.StateV
}

// watchInbox follows every inbox subject (a plain subscription sees each
// command as the stream stores it) and returns what reports the wire
// version of the first command whose body holds text: read before the
// owner could purge it.
func (f *fleet) watchInbox(text string) func() int {
	f.t.Helper()
	sub, err := f.env.NC.SubscribeSync(f.env.Names.InboxAll())
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.env.NC.Flush(); err != nil {
		f.t.Fatal(err)
	}
	return func() int {
		f.t.Helper()
		defer func() { _ = sub.Unsubscribe() }()
		deadline := time.Now().Add(wait)
		for {
			m, err := sub.NextMsg(time.Until(deadline))
			if err != nil {
				f.t.Fatalf("no command with %q on the inbox: %v", text, err)
			}
			if !strings.Contains(string(m.Data), text) {
				continue
			}
			var head struct{ V int }
			if err := json.Unmarshal(m.Data, &head); err != nil {
				f.t.Fatal(err)
			}
			return head.V
		}
	}
}

// contiguous checks the session's stream: sequences 1..n without a gap or
// a repeat, whichever build wrote them.
func (f *fleet) contiguous(id string) {
	f.t.Helper()
	evs, err := f.env.Events(f.t.Context(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			f.t.Fatalf("session %s: event %d has seq %d:\n%s", id, i, ev.Seq, harness.Trace(evs))
		}
	}
}

func last(evs []wire.Event) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[len(evs)-1].Kind
}

// notFound: a promotion answered 404 while the ingress's fleet view has
// not seen blue's live owner yet.
func notFound(err error) bool {
	var se *harness.StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

// deleted deletes the ended session id through green's ingress and checks
// what each build's ingress answers for it afterwards.
func (f *fleet) deleted(id, alias string) {
	f.t.Helper()
	ctx := f.t.Context()
	var d ingress.Deleted
	if err := f.client.Call(ctx, http.MethodDelete, f.green+"/v1/sessions/"+id, nil, http.StatusOK, &d); err != nil {
		f.t.Fatalf("delete of %s through green: %v", id, err)
	}
	if d.SessionID != id || d.Events == 0 {
		f.t.Fatalf("delete of %s: %+v", id, d)
	}
	evs, err := f.env.Events(ctx, id)
	if err != nil || len(evs) != 0 {
		f.t.Fatalf("%d events of the deleted session %s stay (%v)", len(evs), id, err)
	}
	for _, base := range []string{f.blue, f.green} {
		err := f.client.Call(ctx, http.MethodPost, base+"/v1/deliveries", map[string]string{"alias": alias, "text": "still there?"}, http.StatusAccepted, nil)
		var se *harness.StatusError
		if !errors.As(err, &se) || se.Code != http.StatusGone {
			f.t.Fatalf("a delivery to the deleted session's alias through %s: %v, want 410", base, err)
		}
	}
	err = f.client.Call(ctx, http.MethodGet, f.green+"/v1/sessions/"+id, nil, http.StatusOK, nil)
	var se *harness.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusGone || !strings.Contains(se.Body, `"code":"deleted"`) {
		f.t.Fatalf("GET of the deleted session through green: %v, want 410 deleted", err)
	}
	f.t.Logf("a delete beside blue: session %s deleted (%d events, %d blobs, %d bytes); its alias 410 through both builds", id, d.Events, d.Blobs, d.Bytes)
}
