package main

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// The calculator replies of the fake: step 1's tool call (arguments in two
// fragments), step 2's answer in three pieces, each sent only once the SSE
// client has read the one before (so the deltas are seen one by one).
func calculatorCall() reply {
	return stream(callStart(0, "call_1", "calculator", `{"expression":`), callArgs(0, ` "12*7"}`), stop("tool_calls"), usage(50, 12, 8))
}

func gatedAnswer(seen <-chan struct{}, pieces ...string) reply {
	return func(x *exchange) {
		for i, p := range pieces {
			if i > 0 && !x.wait(seen) {
				return
			}
			x.send(text(p))
		}
		x.send(stop("stop"), usage(80, 5, 0))
		x.done()
	}
}

// "what is 12*7?" through NATS, the ingress and the example's owner: the
// model asks for the calculator, the tool's result 84 goes into the
// history, the answer streams to SSE as message.delta events (no id:
// line) that concatenate to the durable message.output, and turn.completed
// carries the usage of both model calls. The second request carries the
// tool call and its result; the next turn's request carries the whole
// history in order, each entry once.
func TestCalculatorOverSSE(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	st.startOwner()
	id, ev := st.session()
	st.fake.push(calculatorCall(), gatedAnswer(ev.seen, "12*7 ", "is ", "84."))
	st.say(id, "what is 12*7?")
	frames := ev.until("turn.completed", kind(wire.EventTurnCompleted))

	var deltas []string
	var turn string
	for _, f := range frames {
		if isDelta(f) {
			d := liveData(t, f)
			deltas, turn = append(deltas, d.Text), d.TurnID
			if d.Step != 2 {
				t.Fatalf("delta %+v: want step 2 (the answer's)", d)
			}
		}
		if f.Event == wire.EventMessageOutput && len(deltas) != 3 {
			t.Fatalf("message.output after %d deltas: want all three first; %s", len(deltas), describe(frames))
		}
	}
	if outs := outputs(t, frames); !slices.Equal(outs, []string{"12*7 is 84."}) || strings.Join(deltas, "") != outs[0] {
		t.Fatalf("outputs %q, deltas %q: want one output, the deltas' concatenation", outs, deltas)
	}
	var done wire.TurnCompletedV2
	durable(t, frames[len(frames)-1], &done)
	if want := (runtime.Usage{InputTokens: 130, OutputTokens: 17, CachedTokens: 8}); done.TurnID != turn || done.Usage != want {
		t.Fatalf("turn.completed %+v: want turn %s with usage %+v", done, turn, want)
	}
	msgs := []string{`{"content":"You are terse.","role":"system"}`, `{"content":"what is 12*7?","role":"user"}`}
	wantMessages(t, st.fake, 1, msgs)
	msgs = append(msgs,
		`{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"expression\":\"12*7\"}","name":"calculator"},"id":"call_1","type":"function"}]}`,
		`{"content":"84","role":"tool","tool_call_id":"call_1"}`)
	wantMessages(t, st.fake, 2, msgs)

	st.fake.push(stream(text("You're welcome."), stop("stop")))
	st.say(id, "thanks")
	ev.until("the second turn.completed", kind(wire.EventTurnCompleted))
	wantMessages(t, st.fake, 3, append(msgs, `{"content":"12*7 is 84.","role":"assistant"}`, `{"content":"thanks","role":"user"}`))
}

// wantMessages checks the messages of the fake's request n.
func wantMessages(t *testing.T, f *fake, n int, want []string) {
	t.Helper()
	if got := f.messages(n); !slices.Equal(got, want) {
		t.Fatalf("request %d messages\n%s\nwant\n%s", n, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// POST /v1/sessions/{id}/cancel mid-stream: the model's HTTP request is
// aborted (the fake sees its context end), the step's deltas are
// discarded (message.discarded) and turn.cancelled follows; the next
// delivery is answered as usual.
func TestCancelOverSSE(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	st.startOwner()
	id, ev := st.session()
	aborted := make(chan struct{})
	st.fake.push(func(x *exchange) {
		x.send(text("Let me think"))
		if x.hold() {
			close(aborted)
		}
	})
	st.say(id, "think hard")
	frames := ev.until("a delta", isDelta)
	d := liveData(t, frames[len(frames)-1])
	st.post("/v1/sessions/"+id+"/cancel", map[string]any{}, http.StatusAccepted, nil)
	select {
	case <-aborted:
	case <-time.After(wait):
		t.Fatalf("the model's request was not aborted within %s of the cancel", wait)
	}
	var discarded, cancelled bool
	ev.until("message.discarded and turn.cancelled", func(f harness.Frame) bool {
		switch f.Event {
		case wire.EventMessageDiscarded:
			discarded = discarded || liveData(t, f) == wire.MessageDelta{TurnID: d.TurnID, Step: d.Step}
		case wire.EventTurnCancelled:
			cancelled = true
		}
		return discarded && cancelled
	})
	st.fake.push(stream(text("Sure."), stop("stop")))
	st.say(id, "again")
	if frames := ev.until("turn.completed", kind(wire.EventTurnCompleted)); !slices.Equal(outputs(t, frames), []string{"Sure."}) {
		t.Fatalf("after the cancel: %s", describe(frames))
	}
}

// The model failing, one delivery after another in one session: a 429 is
// retried after its Retry-After (capped here) and answered; a persistent
// 500 is an error event with code model_unavailable after the retries; a
// malformed chunk is model_invalid_response at once (the delta shown
// before it is discarded: message.discarded). After each failure the next delivery is answered
// as usual.
func TestModelFailuresOverSSE(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	st.startOwner(func(c *Config) {
		c.Retries, c.RetryFirstWait, c.RetryMaxWait = 2, 10*time.Millisecond, 100*time.Millisecond
	})
	id, ev := st.session()
	answer := func(say, answer string) {
		t.Helper()
		st.fake.push(stream(text(answer), stop("stop")))
		st.say(id, say)
		if frames := ev.until("turn.completed", kind(wire.EventTurnCompleted)); !slices.Equal(outputs(t, frames), []string{answer}) {
			t.Fatalf("%q: %s; want the answer %q", say, describe(frames), answer)
		}
	}
	// fails waits for turn.completed and, if discard, message.discarded
	// (not ordered with the durable events: it comes the live way).
	fails := func(say, code string, discard bool, replies ...reply) []harness.Frame {
		t.Helper()
		st.fake.push(replies...)
		st.say(id, say)
		var completed, discarded bool
		frames := ev.until("turn.completed", func(f harness.Frame) bool {
			completed = completed || f.Event == wire.EventTurnCompleted
			discarded = discarded || f.Event == wire.EventMessageDiscarded
			return completed && (discarded || !discard)
		})
		var e wire.ErrorData
		for _, f := range frames {
			if f.Event == wire.EventErrorKind {
				durable(t, f, &e)
			}
		}
		if e.Code != code || len(outputs(t, frames)) != 0 {
			t.Fatalf("%q: %s, error %+v; want an error event with code %s", say, describe(frames), e, code)
		}
		return frames
	}

	st.fake.push(status(http.StatusTooManyRequests, "Retry-After", "1"))
	answer("first", "Fine.")
	if n := st.fake.count(); n != 2 {
		t.Fatalf("%d requests for the 429 and its retry, want 2", n)
	}
	fails("second", CodeModelUnavailable, false, status(500), status(500), status(500))
	answer("third", "Back.")
	fails("fourth", CodeModelInvalidResponse, true, stream(text("Hel"), `{"id": "x", "choices": [`)) // the delta discarded
	answer("fifth", "Ok.")
	if n := st.fake.count(); n != 8 {
		t.Fatalf("%d requests, want 8 (1+1, 3, 1, 1, 1)", n)
	}
}
