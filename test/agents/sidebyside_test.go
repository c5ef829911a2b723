package agents

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
)

// Two agents side by side on one NATS: alpha (deployment a1: an owner and
// two ingresses) and beta (b1: an owner and an ingress). An alpha session
// is refused by beta's ingress (HTTP and NATS: 409 agent_mismatch, nothing
// written) and by alpha's owner when a command stamped by b1 reaches its
// inbox directly (command.rejected agent_mismatch, no handoff); alpha's
// subjects reach alpha's ingresses only; a delegation from alpha to the
// named deployment b1 still works. The NATS exchanges are logged as a
// transcript.
func TestTwoAgentsSideBySide(t *testing.T) {
	began := time.Now()
	w := newWorld(t)
	w.owner("alpha", "a1", "a1-1")
	w.owner("beta", "b1", "b1-1")
	alpha := w.ingress("alpha", "a1", "ingress alpha 1")
	w.ingress("alpha", "a1", "ingress alpha 2")
	beta := w.ingress("beta", "b1", "ingress beta")
	t.Logf("up in %s: owners a1 (alpha), b1 (beta); ingresses alpha ×2, beta ×1", time.Since(began).Round(time.Millisecond))
	tr := w.transcript()

	c := w.create(alpha, "hello alpha")
	tr.note("session %s created through alpha's ingress on %s", c.SessionID, c.DeploymentID)
	if c.DeploymentID != "a1" {
		t.Fatalf("created on %s, want a1", c.DeploymentID)
	}
	w.waitDone(c.SessionID, c.Seq)
	sid := c.SessionID

	w.refusedByOtherIngress(tr, beta, sid)
	w.refusedByOwner(tr, alpha, sid)
	w.routedToOwnAgent(tr, sid)
	w.delegatesAcross(tr, alpha, sid)
	t.Logf("done in %s", time.Since(began).Round(time.Millisecond))
}

// refusedByOtherIngress: beta's ingress refuses a delivery to alpha's
// session over HTTP and NATS with 409 agent_mismatch and writes nothing;
// the session stays on a1.
func (w *world) refusedByOtherIngress(tr *transcript, beta, sid string) {
	w.t.Helper()
	before := w.inboxCount(sid)
	body := map[string]string{"sessionId": sid, "text": "hello from beta's channel"}
	code, b := w.call(http.MethodPost, beta+"/v1/deliveries", body, false)
	tr.http(http.MethodPost, beta+"/v1/deliveries", body, code, b)
	w.wantError("HTTP delivery through beta", code, b, http.StatusConflict, "agent_mismatch")

	msg, err := tr.request(w.Names.AgentIngress("beta", "deliver"), body, false)
	w.h.Check(err)
	if got := msg.Header.Get(micro.ErrorCodeHeader); got != "409" || errorCode(msg.Data) != "agent_mismatch" {
		w.t.Fatalf("NATS delivery through beta: %s %q %s, want 409 agent_mismatch", micro.ErrorCodeHeader, got, msg.Data)
	}
	if after := w.inboxCount(sid); after != before {
		w.t.Fatalf("inbox of %s holds %d messages after the refusals, %d before: something was written", sid, after, before)
	}
	if s := w.natsStatus(tr, "alpha", sid, false); s.DeploymentID != "a1" {
		w.t.Fatalf("status after the refusals: deployment %s, want a1", s.DeploymentID)
	}
}

// refusedByOwner: a delivery stamped by beta's deployment b1, published
// straight to the alpha session's inbox, is refused by a1's owner
// (command.rejected agent_mismatch, never a handoff); a delivery through
// alpha afterwards is applied and its turn completes.
func (w *world) refusedByOwner(tr *transcript, alpha, sid string) {
	w.t.Helper()
	cmd := harness.WithID("cross-agent-1", harness.Deliver("stamped by beta's b1"))
	cmd.AcceptedDeploymentID = "b1"
	sent, seq, err := w.Env.Send(w.ctx(), subjects.StableToken(sid), cmd)
	w.h.Check(err)
	data, _ := wire.Encode(wire.Current(), sent)
	tr.published(w.Names.Inbox(subjects.StableToken(sid)), data, "straight to the inbox, stamped b1")

	// Processed either way: rejected (wanted) or applied (after a handoff).
	var rej wire.CommandRejected
	w.h.Eventually(wait, "cross-agent-1 rejected or applied", func() bool {
		evs := w.events(sid)
		all := harness.AllData[wire.CommandRejected](w.t, evs, wire.EventCommandRejected)
		i := slices.IndexFunc(all, func(r wire.CommandRejected) bool { return r.CommandID == sent.ID })
		if i >= 0 {
			rej = all[i]
		}
		_, applied := harness.Find(evs, harness.IsApplied(sent.ID))
		return i >= 0 || applied
	})
	if rej != (wire.CommandRejected{CommandID: sent.ID, Seq: seq, Reason: wire.RejectAgentMismatch}) {
		w.t.Fatalf("command.rejected %+v, want {%s %d agent_mismatch}; events %s", rej, sent.ID, seq, harness.Trace(w.events(sid)))
	}
	tr.note("event command.rejected %s", mustJSON(rej))

	r := w.accepted(alpha, sid, "after the refusal")
	if r.DeploymentID != "a1" || !r.OwnerLive {
		w.t.Fatalf("receipt %+v, want deploymentId a1, ownerLive", r)
	}
	w.waitDone(sid, r.Seq)
	evs := w.events(sid)
	if hs := handoffKinds(evs); len(hs) > 0 {
		w.t.Fatalf("handoff events %v after a trigger from another agent: %s", hs, harness.Trace(evs))
	}
	if _, ok := harness.Find(evs, harness.IsApplied(sent.ID)); ok {
		w.t.Fatalf("the refused command was applied: %s", harness.Trace(evs))
	}
	if outs := harness.Outputs(evs); slices.Contains(outs, "stamped by beta's b1") || !slices.Contains(outs, "after the refusal") {
		w.t.Fatalf("outputs %q", outs)
	}
	w.onDeployment(sid, "a1")
	if s := w.natsStatus(tr, "alpha", sid, true); s.DeploymentID != "a1" {
		w.t.Fatalf("status after the refused trigger: deployment %s, want a1", s.DeploymentID)
	}
	tr.note("session %s: no handoff.* event; status and record on a1; %q answered", sid, "after the refusal")
}

// routedToOwnAgent: baton.ingress.alpha.* reaches alpha's ingresses only
// (their micro service and queue group), the un-prefixed subjects of the
// default agent reach nobody, and deliveries over baton.ingress.alpha.deliver
// are all stamped a1, spread over both alpha instances, none seen by beta's.
func (w *world) routedToOwnAgent(tr *transcript, sid string) {
	w.t.Helper()
	w.serviceOf(tr, "alpha", "a1", 2)
	w.serviceOf(tr, "beta", "b1", 1)
	if got := w.subscribers(w.Names.Ingress("deliver")); len(got) != 0 {
		w.t.Fatalf("%s has subscribers %+v: no ingress of the default agent runs", w.Names.Ingress("deliver"), got)
	}
	_, err := tr.request(w.Names.Ingress("deliver"), map[string]string{"sessionId": sid, "text": "legacy"}, false)
	if !errors.Is(err, nats.ErrNoResponders) {
		w.t.Fatalf("legacy subject: %v, want no responders", err)
	}

	const n = 20
	alphaBefore, perBefore := w.served("baton-ingress-alpha", "deliver")
	betaBefore, _ := w.served("baton-ingress-beta", "deliver")
	var last uint64
	for i := range n {
		r, err := w.natsDeliver(tr, "alpha", sid, "routed "+string(rune('a'+i)), i > 0)
		w.h.Check(err)
		if r.DeploymentID != "a1" || r.SessionID != sid || !r.OwnerLive {
			w.t.Fatalf("delivery %d over NATS: receipt %+v, want session %s, deploymentId a1, ownerLive", i, r, sid)
		}
		last = r.Seq
	}
	w.waitDone(sid, last)
	alphaAfter, perAfter := w.served("baton-ingress-alpha", "deliver")
	betaAfter, _ := w.served("baton-ingress-beta", "deliver")
	tr.note("%d deliveries over %s: all receipts deploymentId a1; alpha's deliver endpoints served %v → %v; beta's %d → %d",
		n, w.Names.AgentIngress("alpha", "deliver"), perBefore, perAfter, betaBefore, betaAfter)
	if alphaAfter-alphaBefore != n || betaAfter != betaBefore {
		w.t.Fatalf("alpha served %d, beta %d of the %d alpha deliveries", alphaAfter-alphaBefore, betaAfter-betaBefore, n)
	}
	for i := range perAfter {
		if perAfter[i] == perBefore[i] {
			w.t.Fatalf("alpha instance %d served none of %d deliveries (%v → %v): the queue group does not spread them", i, n, perBefore, perAfter)
		}
	}
}

// serviceOf checks agent's micro service: instances instances of
// baton-ingress-<agent>, each with metadata agent and deployment dep,
// every endpoint on baton.ingress.<agent>.* in the queue group
// baton-ingress-<agent>, and those subjects subscribed in that group only.
func (w *world) serviceOf(tr *transcript, agent, dep string, instances int) {
	w.t.Helper()
	name := "baton-ingress-" + agent
	infos := w.infos(tr, name)
	if len(infos) != instances {
		w.t.Fatalf("%s: %d instances, want %d", name, len(infos), instances)
	}
	for _, i := range infos {
		if i.Name != name || i.Metadata["agent"] != agent || i.Metadata["deployment"] != dep {
			w.t.Fatalf("%s instance %s: name %s metadata %v", name, i.ID, i.Name, i.Metadata)
		}
		for _, e := range i.Endpoints {
			if !strings.HasPrefix(e.Subject, w.Names.AgentIngress(agent, "")) || e.QueueGroup != name {
				w.t.Fatalf("%s endpoint %s on %s queue %q", name, e.Name, e.Subject, e.QueueGroup)
			}
		}
	}
	subject := w.Names.AgentIngress(agent, "deliver")
	if got := w.queueGroups(subject); len(got) != 1 || got[name] != instances {
		w.t.Fatalf("subscribers of %s by queue group: %v, want %s: %d", subject, got, name, instances)
	}
}

// delegatesAcross: an alpha session delegates to the named deployment b1
// (/spawn r@b1): the child is created on b1 and its result returns to the
// parent, which stays on a1.
func (w *world) delegatesAcross(tr *transcript, alpha, sid string) {
	w.t.Helper()
	r := w.accepted(alpha, sid, "/spawn r@b1 hello beta")
	w.h.Eventually(wait, "the child's result in the parent", func() bool {
		return harness.OutputCommitted("child r: hello beta")(w.events(sid))
	})
	evs := w.events(sid)
	started := harness.FirstData[wire.ChildStarted](w.t, evs, wire.EventChildStarted)
	if started.Handle != "r" || started.DeploymentID != "b1" {
		w.t.Fatalf("child.started %+v, want handle r on b1", started)
	}
	w.onDeployment(started.ChildSessionID, "b1")
	kid := w.events(started.ChildSessionID)
	if outs := harness.Outputs(kid); !slices.Equal(outs, []string{"hello beta"}) {
		w.t.Fatalf("child outputs %q", outs)
	}
	if n := harness.Count(kid, wire.EventCommandRejected); n != 0 {
		w.t.Fatalf("child %s rejected %d commands: %s", started.ChildSessionID, n, harness.Trace(kid))
	}
	w.waitDone(sid, r.Seq)
	if hs := handoffKinds(w.events(sid)); len(hs) > 0 {
		w.t.Fatalf("parent handoff events %v", hs)
	}
	w.onDeployment(sid, "a1")
	tr.note("/spawn r@b1: child %s created on b1, its result %q back in the parent, which stays on a1",
		started.ChildSessionID, "child r: hello beta")
}

// inboxCount is how many messages the inbox stream holds on session sid's
// inbox subject.
func (w *world) inboxCount(sid string) uint64 {
	w.t.Helper()
	subject := w.Names.Inbox(subjects.StableToken(sid))
	st, err := w.JS.Stream(w.ctx(), w.Names.InboxStream())
	w.h.Check(err)
	info, err := st.Info(w.ctx(), jetstream.WithSubjectFilter(subject))
	w.h.Check(err)
	return info.State.Subjects[subject]
}

// onDeployment fails the test unless session sid's record (leader read)
// is on deployment dep.
func (w *world) onDeployment(sid, dep string) {
	w.t.Helper()
	cur, err := w.Record(w.ctx(), sid)
	w.h.Check(err)
	if cur.Record.DeploymentID != dep {
		b, _ := json.Marshal(cur.Record)
		w.t.Fatalf("record of %s on %s, want %s: %s", sid, cur.Record.DeploymentID, dep, b)
	}
}
