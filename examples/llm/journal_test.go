package main

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
)

// The example's owner process killed right after the model's answer was
// journaled (--fault crash-after-journal:1), before the step's commit: the
// process that takes the session over replays the answer from the journal
// — the fake model counts exactly one request — shows its text as one
// delta after message.discarded, and commits it once.
func TestCrashAfterModelAnswerJournaled(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	p := st.binaryOwners()
	first := p.start("llm-a", "--fault", "crash-after-journal:1")
	id, ev := st.session()
	st.fake.push(stream(text("12*7 "), text("is 84."), stop("stop"), usage(80, 5, 0)))
	st.say(id, "what is 12*7?")
	first.Wait(t, wait)
	if !first.Contains("fault injected: killing this process") {
		t.Fatalf("the owner exited without the fault:\n%s", harness.LastLines(first.Output(), 30))
	}
	p.start("llm-b")
	var completed, discarded bool
	frames := ev.until("turn.completed and message.discarded", func(f harness.Frame) bool {
		completed = completed || f.Event == wire.EventTurnCompleted
		discarded = discarded || f.Event == wire.EventMessageDiscarded
		return completed && discarded
	})
	if outs := outputs(t, ev.frames); !slices.Equal(outs, []string{"12*7 is 84."}) {
		t.Fatalf("outputs %q, want the journaled answer once", outs)
	}
	var replayed []string
	for _, f := range frames[slices.IndexFunc(frames, kind(wire.EventMessageDiscarded)):] {
		if isDelta(f) {
			replayed = append(replayed, liveData(t, f).Text)
		}
	}
	if !slices.Equal(replayed, []string{"12*7 is 84."}) {
		t.Fatalf("deltas after message.discarded %q, want the replayed answer as one", replayed)
	}
	if n := st.fake.count(); n != 1 {
		t.Fatalf("%d model requests, want 1: the re-run replays the journaled answer", n)
	}
	for _, f := range frames {
		if f.Event == wire.EventTurnCompleted {
			var d wire.TurnCompletedV2
			durable(t, f, &d)
			if d.Usage.InputTokens != 80 || d.Usage.OutputTokens != 5 {
				t.Fatalf("turn.completed usage %+v, want the journaled call's", d.Usage)
			}
		}
	}
}

// A cancel while a (slow) tool of the step runs: the step's model call and
// tool calls commit together or not at all, so the next turn's request
// holds no assistant tool call without its result — a message list any
// provider accepts.
func TestCancelDuringToolKeepsHistoryValid(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	running := make(chan struct{}, 1)
	st.startOwner(func(c *Config) {
		c.Tools = []Tool{{Name: "slow", Description: "takes its time", Parameters: map[string]any{"type": "object"},
			Run: func(ctx context.Context, _ string, _ json.RawMessage) (string, bool, error) {
				running <- struct{}{}
				<-ctx.Done()
				return "", false, ctx.Err()
			}}}
	})
	id, ev := st.session()
	st.fake.push(stream(callStart(0, "call_slow", "slow", "{}"), stop("tool_calls")))
	st.say(id, "do the slow thing")
	select {
	case <-running:
	case <-time.After(wait):
		t.Fatal("the slow tool never ran")
	}
	st.post("/v1/sessions/"+id+"/cancel", map[string]any{}, http.StatusAccepted, nil)
	ev.until("turn.cancelled", kind(wire.EventTurnCancelled))
	st.fake.push(stream(text("Done."), stop("stop")))
	st.say(id, "never mind")
	ev.until("turn.completed", kind(wire.EventTurnCompleted))
	msgs := st.fake.messages(2)
	for _, m := range msgs {
		if strings.Contains(m, "tool_calls") || strings.Contains(m, `"role":"tool"`) {
			t.Fatalf("the next request carries the cancelled step's tool call: %s", strings.Join(msgs, "\n"))
		}
	}
	want := []string{`{"content":"You are terse.","role":"system"}`, `{"content":"do the slow thing","role":"user"}`, `{"content":"never mind","role":"user"}`}
	if !slices.Equal(msgs, want) {
		t.Fatalf("request 2 messages\n%s\nwant\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}
}
