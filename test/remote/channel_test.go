package remote_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/harness/inproc"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// A channel service on NATS alone, as the documented channel-service user
// (docs/api.md, "NATS permissions"), on a server whose authorization is
// that block: it creates a session of agent "slack", delivers, reads the
// replies with the events operation (a long poll), looks its session up by
// alias, follows it live on the core event subject across a 10 s
// disconnect (paging fills the gap; a copy JetStream refused, seen on the
// core subject, is dropped by seq), and reads a large output through blob.
// It is refused the inbox, the KV buckets, the object store and another
// prefix's subjects.
func TestChannelService(t *testing.T) {
	t.Parallel()
	srv := permServer(t, map[string]string{"SLACK_BOT_PASSWORD": "bot-pw"},
		"    { user: owner, password: owner-pw }", docUsers(t, "channel-service"))
	w := harness.NewWorldAt(t, userURL(srv, "owner", "owner-pw"), wait,
		harness.WithIngress(func(c *ingress.Config) { c.Agent = "slack" }))
	e := &env{World: w, t: t, h: w.T}
	inproc.Run(t, w.Env, "v1", "p1", func(c *pool.Config) { c.AgentName = "slack" })
	w.Ingress("v1")
	botURL := userURL(srv, "slack-bot", "bot-pw")
	ch := &channel{e: e, c: e.connect(botURL, ""), url: botURL}

	var created ingress.Created
	ch.req("create", `{"alias":"C1.t1","text":"hello"}`, &created)
	id := created.SessionID
	var rc ingress.Receipt
	ch.req("deliver", `{"alias":"C1.t1","text":"second"}`, &rc)
	if rc.SessionID != id {
		t.Fatalf("deliver went to %s, not %s", rc.SessionID, id)
	}
	ch.pollOutputs(id, 0, 2)
	var st ingress.Status
	ch.req("status", `{"alias":"C1.t1"}`, &st)
	if st.SessionID != id || st.DeploymentID != "v1" {
		t.Fatalf("status by alias: %+v", st)
	}

	f := ch.follow(id)
	ch.req("deliver", `{"alias":"C1.t1","text":"live"}`, &rc)
	f.until("the live output", func() bool { return slices.Contains(f.outputs(), "live") })
	f.disconnect()
	for i := range 3 {
		ch.req("deliver", fmt.Sprintf(`{"alias":"C1.t1","text":"while away %d"}`, i), &rc)
	}
	time.Sleep(10 * time.Second) // the documented disconnect
	f.resume()
	f.until("the outputs sent while away", func() bool { return slices.Contains(f.outputs(), "while away 2") })
	f.injectRefusedCopy(w.NC)
	ch.req("deliver", `{"alias":"C1.t1","text":"after"}`, &rc)
	f.until("the output after the copy", func() bool { return slices.Contains(f.outputs(), "after") })
	f.check()

	ch.req("deliver", `{"alias":"C1.t1","text":"/big 700000"}`, &rc)
	ch.bigOutput(id, 700000)
	ch.refusals()
}

// channel is the channel service's connection.
type channel struct {
	e   *env
	c   *conn
	url string // its user's URL
}

// req sends an operation on the agent's subjects and decodes the answer;
// a refusal fails the test.
func (ch *channel) req(op, body string, v any) {
	ch.e.t.Helper()
	msg, err := ch.c.nc.Request("baton.ingress.slack."+op, []byte(body), 20*time.Second)
	if err != nil {
		ch.e.t.Fatalf("%s %s: %v", op, body, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		ch.e.t.Fatalf("%s %s: refused %s %s", op, body, code, msg.Data)
	}
	if err := json.Unmarshal(msg.Data, v); err != nil {
		ch.e.t.Fatalf("%s: %v: %s", op, err, msg.Data)
	}
}

// page is one events page, decoded.
func (ch *channel) page(id string, after uint64, wait string) (ingress.EventPage, []wire.Event) {
	ch.e.t.Helper()
	var p ingress.EventPage
	ch.req("events", fmt.Sprintf(`{"sessionId":%q,"after":%d,"wait":%q}`, id, after, wait), &p)
	evs := make([]wire.Event, len(p.Events))
	for i, raw := range p.Events {
		if err := json.Unmarshal(raw, &evs[i]); err != nil {
			ch.e.t.Fatal(err)
		}
	}
	return p, evs
}

// pollOutputs long-polls from after until n message.output events came.
func (ch *channel) pollOutputs(id string, after uint64, n int) {
	ch.e.t.Helper()
	outs := 0
	deadline := time.Now().Add(wait)
	for outs < n {
		if time.Now().After(deadline) {
			ch.e.t.Fatalf("%d of %d outputs by long poll", outs, n)
		}
		p, evs := ch.page(id, after, "10s")
		outs += len(harness.Outputs(evs))
		after = p.Next
	}
}

// bigOutput finds the output of size bytes, served as its ref, and reads
// it through blob.
func (ch *channel) bigOutput(id string, size int64) {
	ch.e.t.Helper()
	var ref *wire.BlobRef
	after := uint64(0)
	ch.e.h.Eventually(wait, "the large output's ref", func() bool {
		p, evs := ch.page(id, after, "5s")
		after = p.Next
		for _, ev := range evs {
			var d struct {
				Ref *wire.BlobRef `json:"ref"`
			}
			if ev.Kind == wire.EventMessageOutput && json.Unmarshal(ev.Data, &d) == nil && d.Ref != nil && d.Ref.Size == size {
				ref = d.Ref
			}
		}
		return ref != nil
	})
	var content []byte
	for {
		var c ingress.BlobChunk
		ch.req("blob", fmt.Sprintf(`{"sessionId":%q,"digest":%q,"offset":%d}`, id, ref.Digest, len(content)), &c)
		content = append(content, c.Data...)
		if c.EOF {
			break
		}
	}
	if err := ref.Verify(content); err != nil {
		ch.e.t.Fatalf("the output read through blob: %v", err)
	}
}

// refusals: the channel user cannot publish to the inbox, read a KV
// bucket or the object store (the JetStream API, the buckets' subjects),
// or use another prefix's subjects.
func (ch *channel) refusals() {
	ch.e.t.Helper()
	for _, subj := range []string{"baton.inbox.x", "$JS.API.DIRECT.GET.KV_baton_sessions", "$JS.API.STREAM.MSG.GET.OBJ_baton_state",
		"$KV.baton_sessions.x", "$O.baton_state.C.x", "tenant2.ingress.slack.create"} {
		_ = ch.c.nc.Publish(subj, []byte(`{}`))
		ch.c.refused(ch.e, `Publish to "`+subj+`"`)
	}
	for _, subj := range []string{"$KV.baton_sessions.>", "$O.baton_state.>", "baton.inbox.>", "tenant2.events.>"} {
		_, _ = ch.c.nc.SubscribeSync(subj)
		ch.c.refused(ch.e, `Subscription to "`+subj+`"`)
	}
}

// follower follows a session live as the documentation says: a core
// subscription to its event subject, then pages from the last seq seen;
// every event kept once, by seq.
type follower struct {
	ch   *channel
	id   string
	nc   *nats.Conn
	sub  *nats.Subscription
	mu   sync.Mutex
	evs  map[uint64]wire.Event
	last uint64 // every seq up to last is kept
	dups int    // events the subscription delivered with a seq kept already
}

// follow subscribes with a connection of its own, then pages from the
// first event.
func (ch *channel) follow(id string) *follower {
	f := &follower{ch: ch, id: id, evs: map[uint64]wire.Event{}}
	f.resume()
	return f
}

func (f *follower) resume() {
	f.ch.e.t.Helper()
	c := f.ch.e.connect(f.ch.url, "")
	f.nc = c.nc
	sub, err := f.nc.Subscribe("baton.events."+f.id, func(m *nats.Msg) {
		var ev wire.Event
		if json.Unmarshal(m.Data, &ev) != nil {
			return
		}
		f.mu.Lock()
		if _, ok := f.evs[ev.Seq]; ok {
			f.dups++
		}
		f.keep(ev)
		f.mu.Unlock()
	})
	f.ch.e.h.Check(err)
	f.ch.e.h.Check(f.nc.Flush())
	f.sub = sub
	f.fill()
}

// fill pages from the last contiguous seq to the newest event.
func (f *follower) fill() {
	f.ch.e.t.Helper()
	for {
		f.mu.Lock()
		after := f.last
		f.mu.Unlock()
		p, evs := f.ch.page(f.id, after, "0s")
		f.mu.Lock()
		for _, ev := range evs {
			f.keep(ev)
		}
		f.mu.Unlock()
		if len(evs) == 0 || p.Next == after {
			return
		}
	}
}

// keep adds ev unless its seq is kept already; f.mu is held.
func (f *follower) keep(ev wire.Event) {
	if _, ok := f.evs[ev.Seq]; ok || ev.Seq == 0 {
		return // a duplicate (or not an event)
	}
	f.evs[ev.Seq] = ev
	for {
		if _, ok := f.evs[f.last+1]; !ok {
			return
		}
		f.last++
	}
}

func (f *follower) disconnect() { f.nc.Close() }

// until fills gaps until cond holds.
func (f *follower) until(what string, cond func() bool) {
	f.ch.e.t.Helper()
	f.ch.e.h.Eventually(wait, what, func() bool {
		f.fill()
		return cond()
	})
}

// outputs are the kept message.output texts in seq order.
func (f *follower) outputs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var evs []wire.Event
	for seq := uint64(1); seq <= f.last; seq++ {
		evs = append(evs, f.evs[seq])
	}
	return harness.Outputs(evs)
}

// injectRefusedCopy publishes, as the owner's connection, a copy of the
// follower's last event on the session's subject with an expected last
// subject sequence JetStream refuses: core subscribers see it, the stream
// does not store it; the subscriber must see it (and drop it by seq).
func (f *follower) injectRefusedCopy(nc *nats.Conn) {
	f.ch.e.t.Helper()
	f.mu.Lock()
	ev, dups := f.evs[f.last], f.dups
	f.mu.Unlock()
	data, err := json.Marshal(ev)
	f.ch.e.h.Check(err)
	m := nats.NewMsg("baton.events." + f.id)
	m.Data = data
	m.Header.Set(nats.ExpectedLastSubjSeqHdr, "1")
	reply, err := nc.RequestMsg(m, 10*time.Second)
	f.ch.e.h.Check(err)
	if !strings.Contains(string(reply.Data), `"error"`) {
		f.ch.e.t.Fatalf("JetStream stored the copy: %s", reply.Data)
	}
	f.ch.e.h.Eventually(wait, "the copy on the core subject", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.dups > dups
	})
}

// check: the kept events are 1..last, each once, and the pages agree
// (the copy was never stored).
func (f *follower) check() {
	f.ch.e.t.Helper()
	f.fill()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.evs) != int(f.last) {
		f.ch.e.t.Fatalf("kept %d events, contiguous up to %d", len(f.evs), f.last)
	}
	p, evs := f.ch.page(f.id, 0, "0s")
	for _, ev := range evs {
		if kept := f.evs[ev.Seq]; kept.Kind != ev.Kind {
			f.ch.e.t.Fatalf("seq %d: kept %s, the page says %s", ev.Seq, kept.Kind, ev.Kind)
		}
	}
	if uint64(len(evs)) > f.last || len(evs) > 0 && evs[len(evs)-1].Seq != p.Next {
		f.ch.e.t.Fatalf("the pages hold %d events (next %d), the follower %d", len(evs), p.Next, f.last)
	}
}
