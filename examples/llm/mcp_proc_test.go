package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// The owner process, its MCP server a process it runs (--mcp-command),
// killed right after the MCP tool call's result was journaled (--fault
// crash-after-journal:2: the model's answer is the step's journal write 1,
// the echo call write 2), before the step's commit. The process that
// takes the session over runs a server of its own and replays both calls
// from the journal: the MCP servers count exactly one echo call across
// both processes, the model one request for that step; the turn goes on
// with the recorded result.
func TestCrashAfterMCPCallJournaled(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	p := st.binaryOwners()
	cmd, dir := stdioServer(t)
	first := p.start("llm-a", "--mcp-command", cmd, "--fault", "crash-after-journal:2")
	id, ev := st.session()
	st.fake.push(stream(callStart(0, "c1", "echo", `{"text": "hi"}`), stop("tool_calls"), usage(40, 6, 0)),
		stream(text("It said hi."), stop("stop")))
	st.say(id, "echo hi")
	first.Wait(t, wait)
	if !first.Contains("fault injected: killing this process") {
		t.Fatalf("the owner exited without the fault:\n%s", harness.LastLines(first.Output(), 30))
	}
	if got := lines(t, filepath.Join(dir, "calls")); !slices.Equal(got, []string{"echo hi"}) {
		t.Fatalf("the first run's MCP calls %q, want the echo call", got)
	}
	p.start("llm-b", "--mcp-command", cmd)
	ev.until("turn.completed", kind(wire.EventTurnCompleted))
	if outs := outputs(t, ev.frames); !slices.Equal(outs, []string{"It said hi."}) {
		t.Fatalf("outputs %q", outs)
	}
	if got := lines(t, filepath.Join(dir, "calls")); !slices.Equal(got, []string{"echo hi"}) {
		t.Fatalf("MCP calls %q, want exactly one: the re-run replays the journaled call", got)
	}
	if n := st.fake.count(); n != 2 {
		t.Fatalf("%d model requests, want 2: the tool step's (replayed by the re-run) and the answer's", n)
	}
	if msgs := st.fake.messages(2); !slices.Contains(msgs, `{"content":"hi","role":"tool","tool_call_id":"c1"}`) {
		t.Fatalf("request 2 lacks the echo result:\n%s", strings.Join(msgs, "\n"))
	}
	if pids := lines(t, filepath.Join(dir, "pids")); len(pids) != 2 {
		t.Fatalf("MCP server processes %q, want one per owner process", pids)
	}
}

// The MCP server process killed in the middle of a session, and held
// down (it cannot start again): the next call of its tool is an error
// result — a tool entry with isError, which the next model request
// carries — not a failed step, and the session answers. Once the server
// can start again the supervisor has restarted it, and a later call
// works. The server counts the two calls that reached it.
func TestMCPServerKilled(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	cmd, dir := stdioServer(t)
	rec := &recorder{}
	st.wrap = func(a *Agent) runtime.Agent { rec.Agent = a; return rec }
	a := st.startOwner(func(c *Config) {
		c.MCPCommands, c.mcpRestart = []string{cmd}, restartPolicy{first: 10 * time.Millisecond, max: 100 * time.Millisecond}
	})
	server := a.mcp.servers[0]
	id, ev := st.session()
	turn := func(word string) runtime.Entry {
		t.Helper()
		st.fake.push(stream(callStart(0, "c-"+word, "echo", `{"text": "`+word+`"}`), stop("tool_calls")), stream(text("ok"), stop("stop")))
		st.say(id, "echo "+word)
		ev.until("turn.completed", kind(wire.EventTurnCompleted))
		return rec.tool(t, "c-"+word)
	}
	if got := turn("before"); !equalEntry(got, runtime.ToolResult("c-before", "before", false)) {
		t.Fatalf("the first call: %+v", got)
	}
	pids := lines(t, filepath.Join(dir, "pids"))
	pid, err := strconv.Atoi(pids[len(pids)-1])
	st.h.Check(err)
	st.h.Check(os.WriteFile(filepath.Join(dir, "hold"), nil, 0o644))
	st.h.Check(syscall.Kill(pid, syscall.SIGKILL))
	eventually(t, "the supervisor saw the server die", func() bool { return !server.up() })

	got := turn("lost")
	prefix := ErrMCPUnavailable.Error() + ": --mcp-command " + strconv.Quote(cmd) + " is down ("
	if !got.IsError || !strings.HasPrefix(got.Text(), prefix) {
		t.Fatalf("the call while the server is down: %+v, want an error result starting %q", got, prefix)
	}
	if msgs := st.fake.messages(4); !slices.Contains(msgs, mustJSON(map[string]any{"role": "tool", "tool_call_id": "c-lost", "content": got.Text()})) {
		t.Fatalf("request 4 lacks the error result:\n%s", strings.Join(msgs, "\n"))
	}

	st.h.Check(os.Remove(filepath.Join(dir, "hold")))
	eventually(t, "the supervisor restarted the server", server.up)
	if got := turn("after"); !equalEntry(got, runtime.ToolResult("c-after", "after", false)) {
		t.Fatalf("the call after the restart: %+v", got)
	}
	if got := lines(t, filepath.Join(dir, "calls")); !slices.Equal(got, []string{"echo before", "echo after"}) {
		t.Fatalf("MCP calls %q, want the two that reached a server", got)
	}
	if got := lines(t, filepath.Join(dir, "pids")); len(got) != 2 {
		t.Fatalf("MCP server processes %q, want the first and the restarted one", got)
	}
	if outs := outputs(t, ev.frames); !slices.Equal(outs, []string{"ok", "ok", "ok"}) {
		t.Fatalf("outputs %q, want every turn answered", outs)
	}
}

// recorder is the agent recording every history entry its steps return.
type recorder struct {
	*Agent
	mu      sync.Mutex
	entries []runtime.Entry
}

func (r *recorder) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	res, err := r.Agent.Step(ctx, in)
	r.mu.Lock()
	r.entries = append(r.entries, res.History...)
	r.mu.Unlock()
	return res, err
}

// tool is the tool entry of call id.
func (r *recorder) tool(t *testing.T, id string) runtime.Entry {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.entries {
		if e.Role == runtime.RoleTool && e.ToolCallID == id {
			return e
		}
	}
	t.Fatalf("no tool entry of call %s", id)
	return runtime.Entry{}
}

func equalEntry(a, b runtime.Entry) bool {
	return a.Role == b.Role && a.ToolCallID == b.ToolCallID && a.IsError == b.IsError && a.Text() == b.Text()
}
