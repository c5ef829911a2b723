package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/wire"
)

// The example's owner as a real process, killed (SIGKILL) during the
// answer's model call — after a delta was on SSE, before the step
// committed (the fake holds the stream open). A new owner process takes
// the session over and runs the uncommitted step again, once:
// message.discarded {turnId, step} tells the client to drop the first
// run's deltas, the re-run's answer is the only message.output, the
// committed tool step is not re-run, and the next turn's request holds the
// history once.
func TestKillDuringModelCall(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	p := st.binaryOwners()
	first := p.start("llm-a", "--system-prompt", "You are terse.")
	id, ev := st.session()
	held := make(chan struct{})
	st.fake.push(calculatorCall(), func(x *exchange) {
		x.send(text("12*7 "))
		if x.hold() {
			close(held)
		}
	})
	st.say(id, "what is 12*7?")
	frames := ev.until("the first run's delta", isDelta)
	d := liveData(t, frames[len(frames)-1])
	st.h.Kill(first, wait)
	select {
	case <-held: // the dead process's request to the model is gone
	case <-time.After(wait):
		t.Fatalf("the killed owner's model request still open after %s", wait)
	}

	st.fake.push(stream(text("12*7 "), text("is 84."), stop("stop"), usage(80, 5, 0)))
	p.start("llm-b", "--system-prompt", "You are terse.")
	// message.discarded comes the live way, before the re-run's deltas
	// (one publisher, one subject) but not ordered with durable events.
	isDiscard := func(f harness.Frame) bool {
		return f.Event == wire.EventMessageDiscarded && liveData(t, f) == wire.MessageDelta{TurnID: d.TurnID, Step: d.Step}
	}
	var completed, seen bool
	frames = ev.until("turn.completed and message.discarded", func(f harness.Frame) bool {
		completed, seen = completed || f.Event == wire.EventTurnCompleted, seen || isDiscard(f)
		return completed && seen
	})
	discarded := slices.IndexFunc(frames, isDiscard)
	var rerun []string
	for _, f := range frames[discarded:] {
		if isDelta(f) {
			rerun = append(rerun, liveData(t, f).Text)
		}
	}
	outs := outputs(t, ev.frames)
	if !slices.Equal(outs, []string{"12*7 is 84."}) || strings.Join(rerun, "") != outs[0] {
		t.Fatalf("outputs %q, the re-run's deltas %q: want one output, their concatenation", outs, rerun)
	}
	if n := st.fake.count(); n != 3 {
		t.Fatalf("%d model calls, want 3: the tool step once, the answer's step twice", n)
	}
	msgs := st.fake.messages(2)
	wantMessages(t, st.fake, 3, msgs) // the re-run's input is the first run's

	st.fake.push(stream(text("You're welcome."), stop("stop")))
	st.say(id, "thanks")
	ev.until("the second turn.completed", kind(wire.EventTurnCompleted))
	wantMessages(t, st.fake, 4, append(msgs, `{"content":"12*7 is 84.","role":"assistant"}`, `{"content":"thanks","role":"user"}`))
}

// The binary's own flags: --help lists them beside owner's, a bad value
// is a usage error (exit 2) naming the flag, before anything runs — an MCP
// server that cannot be started included.
func TestBinaryFlags(t *testing.T) {
	t.Parallel()
	bin := proctest.Build(t, "github.com/baton-rt/baton/examples/llm")
	out, err := exec.Command(bin, "--help").CombinedOutput()
	for _, want := range []string{"Usage: llm [flags]", "-model string", `(default "gpt-4o-mini")`, "-system-prompt", "-model-retries int",
		"-model-retry-max-wait duration", "-mcp-command value", "-mcp-url value", "-max-tokens-per-turn", "OPENAI_BASE_URL"} {
		if err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("--help: %v, lacks %q:\n%s", err, want, out)
		}
	}
	for _, args := range [][]string{{"--model", ""}, {"--model-retries", "-1"}, {"--model-retry-max-wait", "0s"},
		{"--mcp-command", "srv 'x"}, {"--mcp-url", "ftp://x"}, {"--mcp-command", "/nonexistent/mcp-server"}} {
		cmd := exec.Command(bin, append([]string{"--deployment-id", deployment}, args...)...)
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 2 || !strings.HasPrefix(string(out), "llm: usage: "+args[0]) {
			t.Errorf("%v: %v, exit %d, %q; want a usage error naming the flag", args, err, cmd.ProcessState.ExitCode(), out)
		}
	}
}
