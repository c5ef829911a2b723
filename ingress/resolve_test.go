package ingress_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
)

// hookReads counts the reads of the hooks bucket's key tok.<token> from
// now on: direct gets (the key in the subject) and leader reads (the key
// in the request's body), seen on their request subjects. Only the
// ingress reads a session's stable hook while it runs; an owner reads
// alias hooks of its own (a boot's create of one that exists reads it).
func (e *env) hookReads(token string) *atomic.Int64 {
	e.t.Helper()
	stream := "KV_" + e.Names.HooksBucket()
	key := "$KV." + e.Names.HooksBucket() + "." + subjects.HookKey(token)
	var n atomic.Int64
	for _, subj := range []string{"$JS.API.DIRECT.GET." + stream, "$JS.API.DIRECT.GET." + stream + ".>", "$JS.API.STREAM.MSG.GET." + stream} {
		sub, err := e.NC.Subscribe(subj, func(m *nats.Msg) {
			if strings.HasSuffix(m.Subject, "."+key) || strings.Contains(string(m.Data), `"`+key+`"`) {
				n.Add(1)
			}
		})
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := e.NC.Flush(); err != nil {
		e.t.Fatal(err)
	}
	return &n
}

// A delivery by session ID to a session a run has written reads its
// record only: not its stable hook. An alias is still resolved through
// its hook (which shows the count sees the hooks bucket's reads), and a
// record no run has written yet — a session being created, whose hooks
// may not be claimed yet or may be undone — is still checked against its
// hook: without one the ID is unknown, and nothing is published.
func TestDeliveryByIDReadsTheRecordOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"reads-alias","text":"hi"}`).SessionID
	e.eventually(10*time.Second, "the session idle", func() bool { return e.status(id).Idle })

	stable, alias := e.hookReads(subjects.StableToken(id)), e.hookReads("reads-alias")
	for i := range 3 {
		e.deliver(`{"sessionId":"` + id + `","text":"by id ` + string(rune('a'+i)) + `"}`)
	}
	if n := stable.Load(); n != 0 {
		t.Fatalf("three deliveries by session ID read its stable hook %d times, want 0", n)
	}
	e.deliver(`{"alias":"reads-alias","text":"by alias"}`)
	e.eventually(5*time.Second, "the alias's hook read", func() bool { return alias.Load() > 0 })

	// A record as a create writes it first (epoch 1, no run's commit), with
	// no hook: the ID is unknown until the hook is claimed.
	fresh := "01JZZZZZZZZZZZZZZZZZZZZZZY"
	cp, err := session.EncodeNew(fresh, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := record.New(fresh, record.Owner{RunID: "r-fresh", Deployment: "v1", Process: "p-none", WireV: 1}, cp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.CreateSession(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	reads := e.hookReads(subjects.StableToken(fresh))
	code, b := e.post("/v1/deliveries", `{"sessionId":"`+fresh+`","text":"too early"}`)
	if code != http.StatusNotFound || !strings.Contains(string(b), `"not_found"`) {
		t.Fatalf("a delivery to a record being created = %d %s, want 404 not_found", code, b)
	}
	if reads.Load() == 0 {
		t.Fatal("a record no run has written was not checked against its stable hook")
	}
	if n := e.inboxCount(e.Names.Inbox(subjects.StableToken(fresh))); n != 0 {
		t.Fatalf("the refused delivery left %d inbox messages", n)
	}
}
