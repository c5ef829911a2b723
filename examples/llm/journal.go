package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/baton-rt/baton/runtime"
)

// The model call is journaled (runtime.StepInput.Do): its outcome — the
// answer, or the model's failure — is recorded before the step goes on,
// so a re-run of the step (its owner died after the answer arrived, before
// the commit) gets the same answer back instead of calling (and paying
// for) the model again, and shows its text as one live delta. A call cut
// short by the step's cancellation records nothing. calculator calls are
// journaled too (the pattern for tools with an outside effect);
// remember and recall only touch the step's state, which a re-run
// recomputes from the same input.

// outcome is what the journal records of one model call.
type outcome struct {
	Text  string        `json:"text,omitempty"`
	Calls []toolCall    `json:"calls,omitempty"`
	Usage runtime.Usage `json:"usage,omitzero"`
	// Code and Error are a model failure's (a *ModelError).
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
}

// modelCall is the step's journaled model call.
func (a *Agent) modelCall(ctx context.Context, in runtime.StepInput) (answer, error) {
	live := in.Stream(ctx)
	called := false
	rec, err := in.Do(ctx, "model", func(ctx context.Context, _ string) ([]byte, error) {
		called = true
		r, err := a.call(ctx, live, a.request(in))
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return encodeOutcome(r, err)
	})
	if err != nil {
		return answer{}, err
	}
	var o outcome
	if err := json.Unmarshal(rec, &o); err != nil {
		return answer{}, fmt.Errorf("%w: the journaled model outcome: %v", ErrInvalidResponse, err)
	}
	if !called && o.Text != "" {
		live.Text(o.Text) // replayed: what the crashed run showed, at once
	}
	if o.Code != "" {
		return answer{}, &ModelError{Code: o.Code, Err: errors.New(o.Error)}
	}
	return answer{text: o.Text, calls: o.Calls, usage: o.Usage}, nil
}

// encodeOutcome records an answer, or a model failure as an outcome (so a
// re-run fails the same way); any other error is returned, unrecorded.
func encodeOutcome(r answer, err error) ([]byte, error) {
	o := outcome{Text: r.text, Calls: r.calls, Usage: r.usage}
	var me *ModelError
	switch {
	case errors.As(err, &me):
		o = outcome{Code: me.Code, Error: err.Error()}
	case err != nil:
		o = outcome{Code: CodeModelUnavailable, Error: err.Error()}
	}
	return json.Marshal(o)
}

// toolResult is what the journal records of one tool call.
type toolResult struct {
	Text    string `json:"text"`
	IsError bool   `json:"isError,omitempty"`
}

// runTool runs call c: a tool of Config.Tools or an MCP server, or
// calculator, through the journal; remember and recall directly.
func (a *Agent) runTool(ctx context.Context, in runtime.StepInput, c toolCall, mem *memory) (string, bool, error) {
	t, own := a.tool(c.Name)
	if !own && c.Name != ToolCalculator {
		text, isError := run(c, mem)
		return text, isError, nil
	}
	r, err := runtime.DoJSON(ctx, in, "tool:"+c.Name, func(ctx context.Context, key string) (toolResult, error) {
		if !own {
			text, isError := run(c, mem)
			return toolResult{text, isError}, nil
		}
		text, isError, err := t.Run(ctx, key, json.RawMessage(c.wire().Arguments))
		return toolResult{text, isError}, err
	})
	return r.Text, r.IsError, err
}

// tool is the program's own or an MCP server's tool of that name.
func (a *Agent) tool(name string) (Tool, bool) {
	for _, t := range a.own {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}
