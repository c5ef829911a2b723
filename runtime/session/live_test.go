package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/runtime/session/memory"
	"github.com/baton-rt/baton/wire"
)

// streamer streams the words of a delivery as deltas, then answers with
// the whole text. "fail …" streams, then fails the step; "block …"
// streams, then waits for its context to end, streams "cancelled" and
// reports on late; "hang …" streams, then ignores its context until
// release, streams "late" (after its step's end: it must go nowhere) and
// reports on late.
type streamer struct{ late, release chan struct{} }

func (streamer) EventKinds() []string { return nil }

func (a streamer) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	text := in.Inputs[len(in.Inputs)-1].Text
	live := in.Stream(ctx)
	words := strings.SplitAfter(text, " ")
	for _, w := range words {
		live.Text(w)
	}
	switch words[0] {
	case "fail ":
		return runtime.StepResult{}, errors.New("the model went away")
	case "block ":
		<-ctx.Done()
		live.Text("cancelled")
		a.late <- struct{}{}
		return runtime.StepResult{}, ctx.Err()
	case "hang ":
		<-a.release
		live.Text("late")
		a.late <- struct{}{}
		return runtime.StepResult{}, ctx.Err()
	}
	return runtime.StepResult{Outcome: runtime.OutcomeDone, Events: []runtime.Event{runtime.Output(text)}}, nil
}

func liveRig(t *testing.T, mutate ...func(*session.Env)) (*rig, *memory.Live, streamer) {
	a := streamer{late: make(chan struct{}, 4), release: make(chan struct{})}
	r := newRig(t, append([]func(*session.Env){func(e *session.Env) { e.Agent = a }}, mutate...)...)
	live := memory.NewLive(r.events)
	r.env.Live = live
	return r, live, a
}

// liveMsg is a decoded live event and when it was published.
type liveMsg struct {
	wire.Live
	text   string
	before int // the session's events appended before it
}

func lives(t *testing.T, l *memory.Live, id string) []liveMsg {
	t.Helper()
	var out []liveMsg
	for _, m := range l.Messages(id) {
		ev, err := wire.DecodeLive(m.Data)
		if err != nil {
			t.Fatalf("live event %s: %v", m.Data, err)
		}
		if ev.SessionID != id || ev.DeploymentID != "v1" || ev.Time.IsZero() {
			t.Fatalf("live envelope %s", m.Data)
		}
		var d wire.MessageDelta
		_ = json.Unmarshal(ev.Data, &d)
		out = append(out, liveMsg{Live: ev, text: d.Text, before: m.EventsBefore})
	}
	return out
}

func outputSeq(t *testing.T, r *rig, text string) int {
	for _, e := range r.stream() {
		if e.Kind == wire.EventMessageOutput {
			var d wire.MessageOutput
			_ = json.Unmarshal(e.Data, &d)
			if d.Text == text {
				return int(e.Seq)
			}
		}
	}
	t.Fatalf("no message.output %q", text)
	return 0
}

// A step's deltas are published in order, each with the step's turn and
// step, all before the step's durable output is appended; they
// concatenate to that output; a committed step has no message.discarded.
func TestLiveDeltasPrecedeTheCommit(t *testing.T) {
	r, live, _ := liveRig(t)
	r.start()
	const text = "the quick brown fox jumps"
	r.send(deliver(text))
	r.eventually("the output", func() bool { return len(r.outputs()) == 1 })
	seq := outputSeq(t, r, text)
	got := lives(t, live, r.id)
	var joined strings.Builder
	for i, m := range got {
		if m.Kind != wire.EventMessageDelta || m.TurnID == "" || m.Step != 1 || m.TurnID != got[0].TurnID {
			t.Fatalf("live event %d: %+v, want deltas of step 1 of one turn", i, m)
		}
		if m.before >= seq {
			t.Fatalf("delta %d published after %d events; the output is event %d", i, m.before, seq)
		}
		joined.WriteString(m.text)
	}
	if len(got) != 5 || joined.String() != text {
		t.Fatalf("%d deltas %q, want the 5 words of %q", len(got), joined.String(), text)
	}
}

// A failed step's deltas are followed by message.discarded of its step.
func TestLiveFailedStepDiscarded(t *testing.T) {
	r, live, _ := liveRig(t)
	r.start()
	r.send(deliver("fail at once"))
	r.eventually("the error event", func() bool { return hasKind(r.stream(), wire.EventErrorKind) })
	r.eventually("message.discarded", func() bool { return lastKind(lives(t, live, r.id)) == wire.EventMessageDiscarded })
	got := lives(t, live, r.id)
	if len(got) != 4 || got[3].TurnID != got[0].TurnID || got[3].Step != 1 {
		t.Fatalf("live events %+v, want 3 deltas then message.discarded of their step", got)
	}
}

// A cancelled step ends with message.discarded: after every delta its
// agent sent before it returned, the one it sent on seeing the cancel
// included.
func TestLiveCancelledStepDiscarded(t *testing.T) {
	r, live, a := liveRig(t)
	r.start()
	r.send(deliver("block on it"))
	r.eventually("deltas", func() bool { return len(lives(t, live, r.id)) == 3 })
	r.send(wire.Command{Kind: wire.KindCancel})
	waitLate(t, a)
	r.eventually("message.discarded", func() bool { return lastKind(lives(t, live, r.id)) == wire.EventMessageDiscarded })
	r.send(deliver("next one"))
	r.eventually("the next output", func() bool { return len(r.outputs()) == 1 })
	got := lives(t, live, r.id)
	if len(got) < 5 || got[3].text != "cancelled" || got[4].Kind != wire.EventMessageDiscarded {
		t.Fatalf("live events %+v, want 3 deltas, \"cancelled\", then message.discarded", got)
	}
}

// A step past the step timeout is discarded; its agent, still running
// after the step's end, streams into nothing.
func TestLiveTimedOutStepDiscarded(t *testing.T) {
	r, live, a := liveRig(t, func(e *session.Env) { e.StepTimeout = 200 * time.Millisecond })
	r.start()
	r.send(deliver("hang until released"))
	r.eventually("the step_timeout error", func() bool { return hasKind(r.stream(), wire.EventErrorKind) })
	r.eventually("message.discarded", func() bool { return lastKind(lives(t, live, r.id)) == wire.EventMessageDiscarded })
	close(a.release)
	waitLate(t, a)
	r.send(deliver("next one"))
	r.eventually("the next output", func() bool { return len(r.outputs()) == 1 })
	got := lives(t, live, r.id)
	if got[3].Kind != wire.EventMessageDiscarded {
		t.Fatalf("live events %+v, want 3 deltas then message.discarded", got)
	}
	for _, m := range got {
		if m.text == "late" {
			t.Fatalf("a delta sent after the step's end was published: %+v", m)
		}
	}
}

// A run that boots with a step in flight (its predecessor died in that
// step) publishes message.discarded for the step before it runs it again.
func TestLiveRerunAfterCrashDiscardedFirst(t *testing.T) {
	r, live, a := liveRig(t)
	ctx, cancel := context.WithCancel(context.Background())
	r.startCtx(ctx)
	r.send(deliver("block for ever"))
	r.eventually("deltas", func() bool { return len(lives(t, live, r.id)) == 3 })
	cancel() // the run dies mid-step: nothing more is committed
	<-r.done
	waitLate(t, a)
	// The dying run's step saw its context end: "cancelled", discarded.
	r.eventually("the dying run's discard", func() bool { return len(lives(t, live, r.id)) == 5 })
	before := len(lives(t, live, r.id))

	r.reboot(t)
	r.eventually("the re-run's deltas", func() bool { return len(lives(t, live, r.id)) >= before+4 })
	got := lives(t, live, r.id)[before:]
	first := lives(t, live, r.id)[0]
	if got[0].Kind != wire.EventMessageDiscarded || got[0].TurnID != first.TurnID || got[0].Step != first.Step {
		t.Fatalf("after the reboot: %+v, want message.discarded of %s/%d first", got[0], first.TurnID, first.Step)
	}
	for _, m := range got[1:4] {
		if m.Kind != wire.EventMessageDelta || m.TurnID != first.TurnID || m.Step != first.Step {
			t.Fatalf("re-run live event %+v, want a delta of the same step", m)
		}
	}
}

// A step that streams nothing publishes nothing live.
func TestLiveQuietStepPublishesNothing(t *testing.T) {
	r, live, _ := liveRig(t, func(e *session.Env) { e.Agent = echo{cancelled: make(chan struct{})} })
	r.start()
	r.send(deliver("quiet"))
	r.eventually("the output", func() bool { return len(r.outputs()) == 1 })
	if got := live.Messages(r.id); len(got) != 0 {
		t.Fatalf("live events of a step that streamed nothing: %d", len(got))
	}
}

func waitLate(t *testing.T, a streamer) {
	t.Helper()
	select {
	case <-a.late:
	case <-time.After(20 * time.Second):
		t.Fatal("the blocked step never saw its context end")
	}
}

func hasKind(evs []wire.Event, kind string) bool {
	for _, e := range evs {
		if e.Kind == kind {
			return true
		}
	}
	return false
}

func lastKind(ms []liveMsg) string {
	if len(ms) == 0 {
		return ""
	}
	return ms[len(ms)-1].Kind
}

// startCtx is start with the run's context given.
func (r *rig) startCtx(ctx context.Context) {
	r.t.Helper()
	r.create()
	go func() { r.done <- r.s.Run(ctx, runtime.BootNew) }()
}

// reboot runs the session again from its stored record, as a process that
// recovers it would (runtime.BootRecover).
func (r *rig) reboot(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	cur, err := r.records.LeaderSession(ctx, r.id)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := session.ReadCheckpoint(ctx, r.env, r.id, cur.Record.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	r.s, err = session.New(r.env, session.Boot{Record: cur.Record, Revision: cur.Revision, Checkpoint: cp, Tokens: cp.Tokens})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	t.Cleanup(func() { cancel(); <-done })
	go func() { done <- r.s.Run(runCtx, runtime.BootRecover) }()
}
