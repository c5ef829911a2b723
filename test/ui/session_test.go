package ui_test

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
)

// A message sent through the composer streams: its deltas show in the
// turn's live output before the durable message.output, which then
// replaces them.
func TestUISessionLive(t *testing.T) {
	defer took(t, time.Now())
	w := newWorld(t, "v1")
	id := w.create(newSession{})
	p := openUI(t, w.base(), adminToken)
	p.session(id)

	// The demo streams the text word by word, then sleeps 8 s, then
	// commits the step's message.output.
	const text = "/streamsleep 8s the quick brown fox"
	p.composer(text, "queue")
	p.until("the live output of the deltas, before any message.output", `(text) => {
		const live = document.querySelector("section#timeline div.turn div.live-output");
		return live !== null && live.textContent.includes(text) &&
			document.querySelector('section#timeline div.event[data-kind="message.output"]') === null;
	}`, text)
	p.shot("session-live")
	p.until("the composer cleared", `() => document.querySelector("form#composer textarea[name=text]").value === ""`)
	seq := p.attr("form#composer", "data-last-seq")

	p.hasText(`section#timeline div.turn div.event[data-kind="message.output"]`, text)
	p.gone("div.live-output")
	evs := w.eventsUntil(id, "the turn completed", func(evs []wire.Event) bool {
		return harness.Count(evs, wire.EventTurnCompleted) == 1
	})
	p.timeline(evs)
	applied, err := harness.Applied(evs)
	if err != nil || len(applied) != 1 || strconv.FormatUint(applied[0].Seq, 10) != seq {
		t.Fatalf("composer data-last-seq %q, commands applied %+v (%v): want the receipt's seq", seq, applied, err)
	}
	p.shot("session-output")
}

// A session waiting on /ask shows an input form; answering it applies the
// answer: the form goes, the timeline gains the demo's output of the
// answer and the end of the turn.
func TestUIAnswerInput(t *testing.T) {
	defer took(t, time.Now())
	w := newWorld(t, "v1")
	id := w.create(newSession{Text: "/ask why?"})
	rid := w.waitingInput(id)
	p := openUI(t, w.base(), adminToken)
	p.session(id)

	form := fmt.Sprintf(`form.input-form[data-request-id=%q]`, rid)
	p.visible(form)
	p.hasText(event(wire.EventInputRequested), "why?")
	p.shot("session-input")
	p.set(form+" textarea[name=value]", "because")
	p.click(form + " button[type=submit]")

	p.gone("form.input-form")
	answer, _ := json.Marshal("because")
	p.hasText(event(wire.EventMessageOutput), "input "+rid+": "+string(answer))
	evs := w.eventsUntil(id, "the turn completed", func(evs []wire.Event) bool {
		return harness.Count(evs, wire.EventTurnCompleted) == 1
	})
	p.timeline(evs)
	p.until("the status no longer waiting for "+rid, `(rid) => {
		const wf = document.querySelector('section#status dd[data-field="waitingFor"]');
		return wf !== null && !wf.textContent.includes(rid) && !wf.textContent.includes("input");
	}`, rid)
	p.shot("session-answered")
}

// The admin actions pause and resume a session; its status follows.
func TestUIPauseResume(t *testing.T) {
	defer took(t, time.Now())
	w := newWorld(t, "v1")
	id := w.create(newSession{Text: "hello"})
	w.Turns("v1", id, 1)
	p := openUI(t, w.base(), adminToken)
	p.session(id)
	p.textIs(field("state"), "active")

	p.click("button#pause")
	p.textIs(field("state"), "paused")
	p.hasText("#action-result", "202")
	p.visible(event(wire.EventSessionPaused))
	p.textIs(field("why"), "paused")
	w.statusUntil(id, "paused (the API agrees)", func(s status) bool { return s.State == "paused" })
	p.shot("session-paused")

	p.click("button#resume")
	p.textIs(field("state"), "active")
	p.visible(event(wire.EventSessionResumed))
	p.shot("session-resumed")
}

// A session on v1 moves to v2 at its next message after v2 is promoted
// (from the deployments page); its open page shows the handoff.
func TestUIHandoff(t *testing.T) {
	defer took(t, time.Now())
	w := newWorld(t, "v1", "v2")
	id := w.create(newSession{Text: "hello"})
	w.Turns("v1", id, 1)
	p := openUI(t, w.base(), adminToken)

	p.route("#/deployments")
	v2 := `div.agent[data-agent="default"] div.deployment[data-deployment="v2"]`
	p.visible(`section#agents[data-loaded="true"] > ` + v2)
	p.click(v2 + " button.promote")
	p.hasText("#action-result", "200")
	p.visible(`section#agents[data-loaded="true"] > ` + v2 + ".promoted")
	p.gone(`div.deployment[data-deployment="v1"].promoted`)
	p.shot("deployments-promoted")
	w.stamps("v2")

	p.session(id)
	p.textIs(field("deploymentId"), "v1")
	p.composer("after the promotion", "")
	evs := w.eventsUntil(id, "handed off and answered on v2", harness.OutputCommitted("after the promotion"))
	done, ok := harness.Find(evs, harness.IsKind(wire.EventHandoffCompleted))
	if !ok {
		t.Fatalf("no handoff.completed in %s", harness.Trace(evs))
	}
	var hc wire.HandoffCompleted
	if err := json.Unmarshal(done.Data, &hc); err != nil {
		t.Fatal(err)
	}
	p.hasText(`section#timeline div.event.handoff[data-kind="handoff.completed"]`, "v1 → v2", fmt.Sprintf("epoch %d", hc.Epoch))
	p.hasText(event(wire.EventMessageOutput), "after the promotion")
	p.textIs(field("deploymentId"), "v2")
	p.textIs(field("epoch"), strconv.FormatUint(hc.Epoch, 10))
	p.shot("session-handoff")
}
