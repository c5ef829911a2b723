package remote_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/test/remote/worker"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// permWait bounds each wait of the permissions test: the whole test takes
// a few seconds, and a refused permission shows long before this.
const permWait = wait

// The documented NATS permissions (docs/api.md, "Remote agents: worker and
// owner users"), on a server whose authorization is the documented blocks
// themselves: the worker user of v1 serves steps end to end (deltas, a
// journaled call, paged history) and is refused everything else; a worker
// user of v2 and a channel service can neither take nor answer a step of
// v1, which fails with agent_unavailable.
func TestPermissions(t *testing.T) {
	t.Parallel()
	workers := docUsers(t, "worker")
	srv := permServer(t, map[string]string{
		"WORKER_V1_PASSWORD": "w1-pw", "WORKER_V2_PASSWORD": "w2-pw", "SLACK_BOT_PASSWORD": "bot-pw",
	}, "    { user: owner, password: owner-pw }", workers, forDeployment(workers, "v2"), docUsers(t, "channel-service"))
	e := newPermEnv(t, userURL(srv, "owner", "owner-pw"))
	// One attempt: this test is about the failure itself; retries are
	// retry_test.go's.
	e.owner("a", "--agent-unavailable-after", "5s", "--agent-inline-bytes", "64", "--step-retries", "0")

	w1, served := e.permWorker(userURL(srv, "worker-v1", "w1-pw"))
	id := e.create()
	e.servesSteps(id)
	if d := w1.denied.all(); len(d) != 0 {
		t.Fatalf("the documented worker was refused %q", d)
	}
	w1.refusedAll(e, served())

	w1.w.Close()
	e.h.Check(w1.nc.Flush()) // its queue subscription is gone
	e.rogues(srv, id)
}

// servesSteps runs three turns of session id on the worker: two steps
// with deltas on SSE, a journaled call, and a history paged from the
// history subject (the owner inlines at most 64 bytes).
func (e *env) servesSteps(id string) {
	e.t.Helper()
	sse := e.h.SSE(e.ing.URL() + "/v1/sessions/" + id + "/events")
	e.say(id, "two")
	frames, err := sse.Until(permWait, "the two-step turn's output", func(f harness.Frame) bool {
		return f.Event == wire.EventMessageOutput && strings.Contains(f.Data, "two steps")
	})
	e.h.Check(err)
	if n := countFrames(frames, wire.EventMessageDelta); n != 2 {
		e.t.Fatalf("%d deltas on SSE, want the two steps'", n)
	}
	e.say(id, "do")
	if got := lastOutput(e.turns(id, 2)); got != "fetched 1" {
		e.t.Fatalf("output %q, want fetched 1 (a journaled call)", got)
	}
	e.say(id, "history")
	var entries, pages int
	got := lastOutput(e.turns(id, 3))
	if _, err := fmt.Sscanf(got, "history %d entries in %d pages", &entries, &pages); err != nil || entries == 0 || pages == 0 {
		e.t.Fatalf("output %q, want the history paged", got)
	}
}

// rogues: with v1's worker gone, v2's worker user and the channel service
// try to take v1's next step (subscriptions on its step subject, in any
// queue group) and to answer it on its reply subject, read off the server
// while the owner waits; the step fails with agent_unavailable, never with
// their reply, and the server reported every attempt refused.
func (e *env) rogues(srv *server.Server, id string) {
	e.t.Helper()
	v2 := e.connect(userURL(srv, "worker-v2", "w2-pw"), "baton.agent.v2.inbox")
	bot := e.connect(userURL(srv, "slack-bot", "bot-pw"), "")
	rogues := []*conn{v2, bot}
	forged := []byte(`{"v":1,"outcome":"done","events":[{"kind":"message.output","data":{"text":"rogue"}}]}`)
	answer := func(m *nats.Msg) { _ = m.Respond(forged) }
	refusals := []string{`Subscription to "baton.agent.v1.step"`}
	for _, c := range rogues {
		_, _ = c.nc.Subscribe("baton.agent.v1.step", answer)
		for _, q := range []string{"baton-agent-v1", "baton-agent-v2"} {
			_, _ = c.nc.QueueSubscribe("baton.agent.v1.step", q, answer)
			refusals = append(refusals, `Subscription to "baton.agent.v1.step" using queue "`+q+`"`)
		}
		e.h.Check(c.nc.Flush())
	}

	before, n := len(e.events(id)), e.completed(id)
	e.say(id, "rogue")
	var token string
	e.h.Eventually(permWait, "the owner waiting for v1's step", func() bool {
		token = stepToken(srv)
		return token != "" || e.completed(id) > n // a rogue took it: the checks below say so
	})
	waiting := false // the forged replies reached the server while the owner waited
	if token != "" {
		reply := "baton.agent.v1.reply." + token
		refusals = append(refusals, `Publish to "`+reply+`"`)
		for _, c := range rogues {
			_ = c.nc.Publish(reply, forged)
			e.h.Check(c.nc.Flush()) // the server has seen the forged reply
		}
		waiting = stepToken(srv) == token
	}

	evs := e.turns(id, n+1)
	errs := errorsOf(e.t, evs[before:])
	if outs := harness.Outputs(evs[before:]); len(outs) != 0 {
		e.t.Fatalf("outputs %q: a rogue answered v1's step", outs)
	}
	if len(errs) != 1 || errs[0].Code != wire.CodeAgentUnavailable {
		e.t.Fatalf("errors %+v, want one agent_unavailable", errs)
	}
	if !waiting {
		e.t.Fatal("the step ended before the forged replies reached the server: the test proves nothing")
	}
	for _, c := range rogues {
		for _, r := range refusals {
			c.refused(e, r)
		}
	}
}

// refusedAll checks the worker's refusals: the step subject (publish, and
// a plain subscription), the inbox, events and JetStream API subjects, a
// reply subject it was not sent, and a second reply to a step it answered.
func (c *conn) refusedAll(e *env, tokens []string) {
	e.t.Helper()
	if len(tokens) == 0 {
		e.t.Fatal("the worker served no step")
	}
	_ = c.nc.Publish("baton.agent.v1.step", []byte(`{}`))
	c.refused(e, `Publish to "baton.agent.v1.step"`)
	_, _ = c.nc.SubscribeSync("baton.agent.v1.step")
	c.refused(e, `Subscription to "baton.agent.v1.step"`)
	for _, subj := range []string{"baton.inbox.>", "baton.events.>", "$JS.API.>", "_INBOX.>", "baton.agent.v1.reply.*"} {
		_, _ = c.nc.SubscribeSync(subj)
		c.refused(e, `Subscription to "`+subj+`"`)
	}
	for _, subj := range []string{"baton.agent.v1.reply.forged", "baton.agent.v1.reply." + tokens[0], "baton.inbox.x", "$JS.API.INFO"} {
		_ = c.nc.Publish(subj, []byte(`{"v":1,"outcome":"done"}`))
		c.refused(e, `Publish to "`+subj+`"`)
	}
}

// newPermEnv is newEnv's environment on the server of url (the owner
// user's): bin/owner and the ingress connect as that user.
func newPermEnv(t *testing.T, url string) *env {
	t.Helper()
	return newEnvAt(t, url)
}

// conn is a client connection and the permission violations the server
// reported on it.
type conn struct {
	nc     *nats.Conn
	w      *worker.Worker
	denied denials
}

// connect opens a connection to url (a user's) with inbox prefix inbox
// (none: the default).
func (e *env) connect(url, inbox string) *conn {
	e.t.Helper()
	c := &conn{}
	opts := []nats.Option{nats.MaxReconnects(-1), nats.ErrorHandler(c.denied.record)}
	if inbox != "" {
		opts = append(opts, nats.CustomInboxPrefix(inbox))
	}
	nc, err := nats.Connect(url, opts...)
	e.h.Check(err)
	e.t.Cleanup(nc.Close)
	c.nc = nc
	return c
}

// permWorker starts a worker of v1 as the user of url, with the
// documented inbox prefix; served lists the tokens of the steps it took.
func (e *env) permWorker(url string) (c *conn, served func() []string) {
	e.t.Helper()
	c = e.connect(url, "baton.agent.v1.inbox")
	var mu sync.Mutex
	var tokens []string
	c.w = &worker.Worker{NC: c.nc, Deployment: "v1", Handle: func(s *worker.Step) worker.Reply {
		mu.Lock()
		tokens = append(tokens, s.Req.Token)
		mu.Unlock()
		return e.handle("w1", s)
	}}
	e.h.Check(c.w.Start())
	e.t.Cleanup(c.w.Close)
	return c, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(tokens)
	}
}

// refused waits for the server's permissions violation what ("Publish to
// …", "Subscription to …") on c.
func (c *conn) refused(e *env, what string) {
	e.t.Helper()
	want := "Permissions Violation for " + what
	e.h.Eventually(permWait, want, func() bool { return c.denied.saw(want) })
}

// denials records a connection's permission violations.
type denials struct {
	mu   sync.Mutex
	errs []string
}

func (d *denials) record(_ *nats.Conn, _ *nats.Subscription, err error) {
	if !errors.Is(err, nats.ErrPermissionViolation) {
		return
	}
	d.mu.Lock()
	d.errs = append(d.errs, err.Error())
	d.mu.Unlock()
}

// saw reports whether a violation ends with want (the server's text,
// after nats.go's "nats: permissions violation: ").
func (d *denials) saw(want string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.ContainsFunc(d.errs, func(e string) bool { return strings.HasSuffix(e, want) })
}

func (d *denials) all() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.errs)
}

// stepToken is the token of the step an owner of v1 waits on: the last
// token of its subscription baton.agent.v1.*.<token>, read off the server
// as a client with monitoring access could ("" when there is none).
func stepToken(s *server.Server) string {
	sz, err := s.Subsz(&server.SubszOptions{Subscriptions: true, Limit: 100_000})
	if err != nil {
		return ""
	}
	for _, sub := range sz.Subs {
		if tok, ok := strings.CutPrefix(sub.Subject, "baton.agent.v1.*."); ok {
			return tok
		}
	}
	return ""
}

func countFrames(frames []harness.Frame, event string) int {
	n := 0
	for _, f := range frames {
		if f.Event == event {
			n++
		}
	}
	return n
}
