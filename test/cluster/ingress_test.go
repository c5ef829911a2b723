package cluster_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/natsproc"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/internal/topology"
)

// inboxStream is the stream every session's commands are appended to.
const inboxStream = "BATON_INBOX"

// TestIngressAcrossElection: a delivery POSTed right after the nats-server
// leading BATON_INBOX is SIGKILLed waits for the election and is accepted
// (202), not refused: the ingress bounds each publish attempt and sends it
// again with the same message ID while the stream has no leader, instead of
// waiting out the client's whole timeout on a request the dead leader
// swallowed. The command is applied exactly once. The figures (the
// election as the test's poll saw it, the time to the 202) are logged.
func TestIngressAcrossElection(t *testing.T) {
	if testing.Short() {
		t.Skip("three nats-server processes, an owner and an ingress process")
	}
	h := harness.For(t)
	c := natsproc.Start(t, t.TempDir(), 3)
	env := h.Dial(c.URL())
	ctx := t.Context()
	h.Check(env.Ensure(ctx, topology.Config{Replicas: 3}))
	procs := harness.NewProcs(t, 60)
	owner := proctest.BuildNoRace(t, harness.OwnerPkg)
	h.OwnerProc(procs, "owner o1", owner, harness.OwnerFlags(c.URL(), "v1", "o1", t.TempDir(), 3*time.Second, "--replicas", "3"), wait)
	_, base := h.IngressProc(procs, "ingress v1", proctest.BuildNoRace(t, harness.IngressPkg), c.URL(), "v1", wait, "--insecure-dev")

	client := harness.Client{HTTP: &http.Client{Timeout: 60 * time.Second}}
	var created ingress.Receipt
	h.Check(client.Call(ctx, http.MethodPost, base+"/v1/sessions", map[string]any{"text": "hello"}, http.StatusCreated, &created))
	_, err := env.WaitEvents(ctx, created.SessionID, wait, "hello", harness.OutputCommitted("hello"))
	h.Check(err)

	// An established cluster loses a node: every stream the delivery
	// writes (the inbox, the receipts bucket the ingress created on
	// start) has every replica current first.
	h.Eventually(wait, "every stream's replicas current", func() bool {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		return c.Current(cctx, env.JS) == nil
	})
	lead := -1
	h.Eventually(wait, "a leader of "+inboxStream, func() bool {
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		lead, err = c.Leader(lctx, env.JS, inboxStream)
		return err == nil
	})
	killed := time.Now()
	h.Check(c.Kill(lead))
	elected := make(chan time.Duration, 1)
	go func() {
		for time.Since(killed) < wait {
			lctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			i, err := c.Leader(lctx, env.JS, inboxStream)
			cancel()
			if err == nil && i != lead {
				elected <- time.Since(killed)
				return
			}
			time.Sleep(100 * time.Millisecond) // polling the leader, not synchronisation
		}
		elected <- -1
	}()

	var rc ingress.Receipt
	r, err := client.DoJSON(ctx, http.MethodPost, base+"/v1/deliveries", map[string]any{
		"sessionId": created.SessionID, "text": "during the election", "idempotencyKey": "k-election",
	})
	took := time.Since(killed)
	h.Check(err)
	e := <-elected
	t.Logf("soak: ingress across an election: %s (leading %s) SIGKILLed; new leader after %v (the test's poll); the delivery answered %d after %v",
		c.Name(lead), inboxStream, e.Round(time.Millisecond), r.Code, took.Round(time.Millisecond))
	if r.Code != http.StatusAccepted {
		t.Fatalf("delivery during the election: %d %s, want 202 once the stream has a leader", r.Code, r.Body)
	}
	h.Check(json.Unmarshal(r.Body, &rc))

	h.Check(c.Restart(lead))
	h.Check(c.WaitReady(wait))
	evs, err := env.WaitEvents(ctx, created.SessionID, wait, "the delivery", harness.OutputCommitted("during the election"))
	h.Check(err)
	applied := h.CheckStream(evs)
	n := 0
	for _, a := range applied {
		if a.Seq == rc.Seq {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("the delivery (seq %d) applied %d times: %+v", rc.Seq, n, applied)
	}
}
