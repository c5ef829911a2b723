package agentapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// scripted is the agent of these tests, an LLM agent's shape without the
// model: it records every StepInput, and per delivery text
//
//	"/tool <q>"   step 1 calls the tool lookup(q) (an assistant entry with a
//	              tool call), step 2 answers from the tool's result (a tool
//	              entry, then an assistant text), each step reporting usage;
//	"/loop"       asks for another step for ever (outcome continue);
//	"/plain <t>"  echoes t and reports no usage (nothing a state version 2
//	              owner could not read);
//	anything else is echoed (an assistant text), with usage.
type scripted struct {
	mu     sync.Mutex
	inputs []runtime.StepInput
}

func (*scripted) EventKinds() []string { return nil }

func (a *scripted) Step(_ context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	a.mu.Lock()
	a.inputs = append(a.inputs, in)
	a.mu.Unlock()
	text := lastDelivery(in)
	switch {
	case strings.HasPrefix(text, "/tool "):
		return toolStep(in, strings.TrimPrefix(text, "/tool ")), nil
	case strings.HasPrefix(text, "/plain "):
		return answer("echo: "+strings.TrimPrefix(text, "/plain "), runtime.Usage{}), nil
	case text == "/loop":
		return runtime.StepResult{Outcome: runtime.OutcomeContinue, Usage: runtime.Usage{InputTokens: 1, OutputTokens: 1}}, nil
	}
	return answer("echo: "+text, runtime.Usage{InputTokens: 7, OutputTokens: 3}), nil
}

// lastDelivery is the text of the turn's delivery: this step's input, or
// (for a later step) the newest user message of the history.
func lastDelivery(in runtime.StepInput) string {
	for i := len(in.History) - 1; i >= 0; i-- {
		if e := in.History[i]; e.Role == runtime.RoleUser && e.Kind == "" {
			return e.Text()
		}
	}
	return ""
}

func toolStep(in runtime.StepInput, q string) runtime.StepResult {
	callID := in.TurnID + "-call"
	if in.Step == 1 {
		args, _ := json.Marshal(map[string]string{"q": q})
		call := runtime.Entry{Role: runtime.RoleAssistant, Content: []runtime.Part{runtime.TextPart("Looking up " + q + ".")},
			ToolCalls: []runtime.ToolCall{{ID: callID, Name: "lookup", Arguments: args}}}
		return runtime.StepResult{Outcome: runtime.OutcomeContinue, History: []runtime.Entry{call},
			Usage: runtime.Usage{InputTokens: 100, OutputTokens: 20, CachedTokens: 80, CostUSD: 0.001}}
	}
	r := answer("The answer for "+q+" is 42.", runtime.Usage{InputTokens: 150, OutputTokens: 30, CostUSD: 0.002})
	r.History = append([]runtime.Entry{runtime.ToolResult(callID, "lookup("+q+") = 42", q == "broken")}, r.History...)
	return r
}

// answer is a done step that says text (message.output and the assistant
// entry it appends itself) and reports usage.
func answer(text string, u runtime.Usage) runtime.StepResult {
	data, _ := json.Marshal(wire.MessageOutput{Text: text})
	return runtime.StepResult{Outcome: runtime.OutcomeDone, Usage: u,
		Events:  []runtime.Event{{Kind: wire.EventMessageOutput, Data: data}},
		History: []runtime.Entry{runtime.AssistantText(text)}}
}

// seen returns the recorded inputs of session id.
func (a *scripted) seen(id string) []runtime.StepInput {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []runtime.StepInput
	for _, in := range a.inputs {
		if in.SessionID == id {
			out = append(out, in)
		}
	}
	return out
}

// last returns the newest recorded input of session id.
func (a *scripted) last(id string) (runtime.StepInput, error) {
	all := a.seen(id)
	if len(all) == 0 {
		return runtime.StepInput{}, fmt.Errorf("no step of %s ran", id)
	}
	return all[len(all)-1], nil
}
