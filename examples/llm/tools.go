package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/baton-rt/baton/runtime"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
)

// The tools the model may call.
const (
	ToolCalculator = "calculator"
	ToolRemember   = "remember"
	ToolRecall     = "recall"
)

// Tool is a tool of a program's own (Config.Tools).
type Tool struct {
	Name, Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters map[string]any
	// Run executes one call: args as the model sent them (JSON), key the
	// call's idempotency key for an outside API. The text is the model's
	// to read; isError marks a failed tool. An error fails the step (a
	// cancelled step's is its context's).
	Run func(ctx context.Context, key string, args json.RawMessage) (text string, isError bool, err error)
}

// tools are the tool definitions of every request: the built-ins, then
// the program's own.
func tools(own []Tool) []openai.ChatCompletionToolUnionParam {
	defs := builtinTools()
	for _, t := range own {
		defs = append(defs, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: t.Name, Description: openai.String(t.Description), Parameters: shared.FunctionParameters(t.Parameters),
		}))
	}
	return defs
}

// builtinTools are calculator, remember and recall.
func builtinTools() []openai.ChatCompletionToolUnionParam {
	str := map[string]any{"type": "string"}
	def := func(name, desc string, props map[string]any, required ...string) openai.ChatCompletionToolUnionParam {
		return openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: name, Description: openai.String(desc),
			Parameters: shared.FunctionParameters{"type": "object", "properties": props, "required": required},
		})
	}
	return []openai.ChatCompletionToolUnionParam{
		def(ToolCalculator, "Evaluates an arithmetic expression: numbers, + - * /, parentheses, unary minus. Returns the result.",
			map[string]any{"expression": map[string]any{"type": "string", "description": "e.g. (12.5 - 2) * 7 / -3"}}, "expression"),
		def(ToolRemember, "Remembers a value under a key for the rest of this conversation.",
			map[string]any{"key": str, "value": str}, "key", "value"),
		def(ToolRecall, "Returns the value remembered under a key.", map[string]any{"key": str}, "key"),
	}
}

// toolCall is one tool call of the model's answer, assembled from the
// stream's fragments: Arguments is the text the model produced.
type toolCall struct {
	ID, Name, Arguments string
}

// wire is the call as a history entry holds it: arguments that are JSON
// compacted (as a checkpoint stores them, so a request rebuilt from the
// history is the same whether the history came from memory or from a
// checkpoint), none as {}, other text as a JSON string (the history holds
// JSON only; request turns it back into the text the model sent).
func (c toolCall) wire() runtime.ToolCall {
	var args bytes.Buffer
	switch {
	case strings.TrimSpace(c.Arguments) == "":
		args.WriteString("{}")
	case json.Compact(&args, []byte(c.Arguments)) != nil:
		args.Reset()
		b, _ := json.Marshal(c.Arguments)
		args.Write(b)
	}
	return runtime.ToolCall{ID: c.ID, Name: c.Name, Arguments: args.Bytes()}
}

// run runs call c against mem and returns the tool's result text and
// whether it is an error. Every failure is a result for the model to read,
// never a failed step.
func run(c toolCall, mem *memory) (string, bool) {
	var args struct {
		Expression string          `json:"expression"`
		Key        string          `json:"key"`
		Value      json.RawMessage `json:"value"`
	}
	if a := strings.TrimSpace(c.Arguments); a != "" {
		if err := json.Unmarshal([]byte(a), &args); err != nil {
			return fmt.Sprintf("%v: want a JSON object (%v)", ErrArguments, err), true
		}
	}
	switch c.Name {
	case ToolCalculator:
		v, err := Calculate(args.Expression)
		if err != nil {
			return err.Error(), true
		}
		return FormatNumber(v), false
	case ToolRemember:
		if args.Key == "" {
			return ErrArguments.Error() + ": remember needs a key", true
		}
		mem.set(args.Key, scalarText(args.Value))
		return fmt.Sprintf("remembered %q", args.Key), false
	case ToolRecall:
		if v, ok := mem.Values[args.Key]; ok {
			return v, false
		}
		known := "none yet"
		if keys := mem.keys(); len(keys) > 0 {
			known = strings.Join(keys, ", ")
		}
		return fmt.Sprintf("%v: %q (keys: %s)", ErrNotRemembered, args.Key, known), true
	}
	return fmt.Sprintf("%v: %q (tools: %s, %s, %s)", ErrUnknownTool, c.Name, ToolCalculator, ToolRemember, ToolRecall), true
}

// scalarText is a JSON value as remembered text: a string's content, any
// other value's JSON.
func scalarText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

// memory is the agent's durable state: what remember kept, by key.
type memory struct {
	Values  map[string]string `json:"memory,omitempty"`
	changed bool
}

// loadMemory reads the state a previous step committed (none: empty).
func loadMemory(state json.RawMessage) (*memory, error) {
	m := &memory{}
	if len(state) > 0 {
		if err := json.Unmarshal(state, m); err != nil {
			return nil, fmt.Errorf("llm: the session's state is not this agent's: %w", err)
		}
	}
	if m.Values == nil {
		m.Values = map[string]string{}
	}
	return m, nil
}

func (m *memory) set(key, value string) {
	if old, ok := m.Values[key]; !ok || old != value {
		m.Values[key], m.changed = value, true
	}
}

func (m *memory) keys() []string {
	keys := make([]string, 0, len(m.Values))
	for k := range m.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (m *memory) encode() (json.RawMessage, error) { return json.Marshal(m) }
