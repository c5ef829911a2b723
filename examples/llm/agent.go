package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/baton-rt/baton/runtime"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Agent is the LLM agent: a step is one streamed Chat Completions call
// with the session's history, plus the tool calls the model answered with.
// A step whose answer has tool calls runs them, appends the assistant entry
// with the calls and one tool entry per result, and continues the turn; a
// step whose answer has none says it (message.output and an assistant
// entry) and ends the turn. Its only state is what remember keeps
// (StepResult.State). The tools of its MCP servers are connected from New
// (or main's flag check) until Close.
type Agent struct {
	cfg    Config
	client openai.Client
	mcp    *mcpSet // nil: no MCP server
	own    []Tool  // Config.Tools, then the MCP servers' tools
}

// New is the agent of cfg, connected to its MCP servers (Close closes
// them); a bad cfg, an MCP server that cannot be reached or one whose
// tool's name is taken is an error matching ErrConfig.
func New(cfg Config) (*Agent, error) {
	a := &Agent{}
	if err := a.configure(cfg); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return a, nil
}

// configure checks cfg, builds the client — the environment's options
// (OPENAI_BASE_URL, OPENAI_API_KEY), cfg.Options, and no SDK retries (the
// agent retries itself, see call) — and connects the MCP servers and
// lists their tools. It is main's check of the flags: its error is the
// usage error Main shows.
func (a *Agent) configure(cfg Config) error {
	if err := cfg.check(); err != nil {
		return err
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := startMCP(cfg, log)
	if err != nil {
		return err
	}
	opts := append(append([]option.RequestOption{}, cfg.Options...), option.WithMaxRetries(0))
	a.Close()
	a.cfg, a.client, a.mcp = cfg, openai.NewClient(opts...), m
	a.own = append(append([]Tool(nil), cfg.Tools...), m.toolList()...)
	return nil
}

// Close closes the agent's MCP servers: it stops their supervision, closes
// each stdio server's stdin (a process that does not exit within 5s is
// sent SIGTERM, then SIGKILL) and each HTTP session. Call it once no step
// runs any more (main: owner.WithCleanup).
func (a *Agent) Close() {
	a.mcp.close()
	a.mcp = nil
}

// EventKinds implements runtime.Agent: message.output only.
func (*Agent) EventKinds() []string { return nil }

// Step implements runtime.Agent: one model call, streamed to the step's
// live output, then the tool calls it returned. A cancelled or timed-out
// step returns the context's error (the runtime records the cancel or the
// timeout); a model that fails is a failed step with one of the codes of
// errors.go.
func (a *Agent) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	if err := ctx.Err(); err != nil {
		return runtime.StepResult{}, err
	}
	r, err := a.modelCall(ctx, in)
	if ctx.Err() != nil {
		return runtime.StepResult{}, ctx.Err()
	}
	var me *ModelError
	if errors.As(err, &me) {
		return runtime.Failed(me.Code, err), nil
	}
	if err != nil {
		return runtime.Failed(CodeModelUnavailable, err), nil
	}
	return a.result(ctx, in, r)
}

// result is the step's result of the model's answer r.
func (a *Agent) result(ctx context.Context, in runtime.StepInput, r answer) (runtime.StepResult, error) {
	out := runtime.StepResult{Outcome: runtime.OutcomeDone, Usage: r.usage}
	if r.text != "" {
		out.Events = []runtime.Event{runtime.Output(r.text)}
	}
	if len(r.calls) == 0 {
		if r.text != "" {
			out.History = []runtime.Entry{runtime.AssistantText(r.text)}
		}
		return out, nil
	}
	mem, err := loadMemory(in.State)
	if err != nil {
		return runtime.StepResult{}, err
	}
	entry := runtime.Entry{Role: runtime.RoleAssistant}
	if r.text != "" {
		entry.Content = []runtime.Part{runtime.TextPart(r.text)}
	}
	out.History = []runtime.Entry{entry}
	for i, c := range r.calls {
		if c.ID == "" { // a server that sends no IDs: one stable across re-runs
			c.ID = fmt.Sprintf("call_%s_%d_%d", in.TurnID, in.Step, i)
		}
		entry.ToolCalls = append(entry.ToolCalls, c.wire())
		text, isError, err := a.runTool(ctx, in, c, mem)
		if err != nil {
			return runtime.StepResult{}, err
		}
		out.History = append(out.History, runtime.ToolResult(c.ID, text, isError))
	}
	out.History[0] = entry
	out.Outcome = runtime.OutcomeContinue
	if mem.changed {
		out.State, err = mem.encode()
	}
	return out, err
}
