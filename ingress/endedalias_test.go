package ingress_test

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// With --ended-alias new, a delivery to an ended session's alias starts a
// new session that takes the alias over: 202 created, previousSessionId
// the ended one, which stays readable by ID. The new session never sees
// the ended one's commands on the alias's subject. Two racing deliveries
// create one session; a create (POST /v1/sessions) of the alias does the
// same.
func TestEndedAliasNew(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ingress.Config) { c.EndedAlias = ingress.EndedAliasNew })
	e.owner("v1", "p1")
	// The ended session leaves a command it never applied on the alias's
	// subject: a delivery queued behind its running step.
	first := e.deliver(`{"alias":"thread-9","text":"/sleep 1h"}`).SessionID
	e.waitEvents(first, "its step", func(evs []wire.Event) bool { return harness.Count(evs, "turn.started") == 1 })
	e.deliver(`{"alias":"thread-9","text":"never applied"}`)
	e.endSession(first, `{"message":"/done"}`)
	e.waitState(first, record.StateEnded)
	firstEvents := len(e.published(first))

	rc := e.deliver(`{"alias":"thread-9","text":"starting over"}`)
	if !rc.Created || rc.SessionID == first || rc.PreviousSessionID != first {
		t.Fatalf("delivery to the ended alias: %+v, want a new session with previousSessionId %s", rc, first)
	}
	second := rc.SessionID
	evs := e.waitEvents(second, "its answer", func(evs []wire.Event) bool { return harness.Count(evs, "message.output") == 1 })
	if n := harness.Count(evs, "command.applied"); n != 1 {
		t.Fatalf("the new session applied %d commands, want only its own delivery: %v", n, kindsOf(evs))
	}
	if out := harness.LastData[wire.MessageOutput](t, evs, "message.output"); out.Text != "starting over" {
		t.Fatalf("the new session answered %q", out.Text)
	}
	if st := e.status(first); st.State != string(record.StateEnded) || len(e.events(first, 0)) != firstEvents {
		t.Fatalf("the ended session by ID: %+v", st)
	}
	var byAlias ingress.Status
	if code, b := e.call(http.MethodGet, "/v1/sessions?alias=thread-9", ``, testToken); code != http.StatusOK ||
		json.Unmarshal(b, &byAlias) != nil || byAlias.SessionID != second {
		t.Fatalf("the alias names %s %s, want %s", b, byAlias.SessionID, second)
	}

	// Two racing deliveries to the alias ended again: one new session.
	e.endSession(second, ``)
	e.waitState(second, record.StateEnded)
	var wg sync.WaitGroup
	out := make([]ingress.Receipt, 4)
	for i := range out {
		wg.Go(func() { out[i] = e.deliver(`{"alias":"thread-9","text":"again"}`) })
	}
	wg.Wait()
	created := 0
	for _, r := range out {
		if r.SessionID != out[0].SessionID || r.SessionID == second {
			t.Fatalf("racing deliveries went to different sessions: %+v", out)
		}
		if r.Created {
			created++
			if r.PreviousSessionID != second {
				t.Fatalf("the creating receipt %+v, want previousSessionId %s", r, second)
			}
		}
	}
	if created != 1 {
		t.Fatalf("%d receipts created a session, want 1: %+v", created, out)
	}
	third := out[0].SessionID
	e.waitEvents(third, "four answers", func(evs []wire.Event) bool { return harness.Count(evs, "message.output") == len(out) })

	// A create of the ended alias takes it over too.
	e.endSession(third, ``)
	e.waitState(third, record.StateEnded)
	c := e.create(`{"alias":"thread-9","text":"a create"}`)
	if !c.Created || c.PreviousSessionID != third {
		t.Fatalf("create of the ended alias: %+v, want previousSessionId %s", c, third)
	}
}

// With the default (--ended-alias gone) the alias of an ended session is
// 410 gone, for a delivery and a create alike.
func TestEndedAliasGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.deliver(`{"alias":"thread-10","text":"hello"}`).SessionID
	e.endSession(id, ``)
	e.waitState(id, record.StateEnded)
	checkError(t, e, http.MethodPost, "/v1/deliveries", `{"alias":"thread-10","text":"again"}`, testToken, http.StatusGone, "gone")
	checkError(t, e, http.MethodPost, "/v1/sessions", `{"alias":"thread-10"}`, testToken, http.StatusGone, "gone")
}
