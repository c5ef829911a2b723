package agentapi_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

var update = flag.Bool("update", false, "rewrite testdata/*.json from what the test rebuilds")

// A tool-calling agent over several turns keeps a history from which the
// OpenAI chat messages and the Anthropic messages request rebuild exactly
// (testdata/openai.json, testdata/anthropic.json); the usage each step
// reports is summed per turn (turn.completed) and per session (status).
// The owner stops (drains) after two turns and another process of the
// deployment takes the session on, so the history it rebuilds is the one
// read back from the checkpoint.
func TestToolCallingHistory(t *testing.T) {
	e := newEnv(t)
	first := e.owner("v1", "p1")
	id := e.create("v1")
	e.say("v1", id, "/tool weather in Lisbon")
	e.turns(id, 1)
	e.deliver("v1", id, `{"payloads":[{"message":[{"type":"text","text":"and this map?"},{"type":"image","url":"https://example.com/map.png","mediaType":"image/png"}]}]}`)
	e.turns(id, 2)
	e.h.Check(first.Stop())
	e.owner("v1", "p2")
	e.say("v1", id, "/tool broken")
	e.turns(id, 3)
	e.say("v1", id, "thanks")
	evs := e.turns(id, 4)

	in, err := e.agent.last(id)
	e.h.Check(err)
	hist := append(in.History[:len(in.History):len(in.History)], runtime.AssistantText("echo: thanks"))
	golden(t, "testdata/openai.json", openAIMessages(hist))
	golden(t, "testdata/anthropic.json", anthropicRequest(hist))

	tool := usage(250, 50, 80, 0.003)
	want := []runtime.Usage{tool, usage(7, 3, 0, 0), tool, usage(7, 3, 0, 0)}
	for i, c := range completed(t, evs) {
		if c.StopReason != wire.StopDone || !sameUsage(c.Usage, want[i]) {
			t.Errorf("turn %d completed %+v, want stopReason done, usage %+v", i+1, c, want[i])
		}
	}
	total := usage(514, 106, 160, 0.006)
	if st := e.status(id); !sameUsage(st.Usage, total) {
		t.Fatalf("status usage %+v, want %+v", st.Usage, total)
	}
}

func sameUsage(a, b runtime.Usage) bool {
	return a.InputTokens == b.InputTokens && a.OutputTokens == b.OutputTokens && a.CachedTokens == b.CachedTokens &&
		math.Abs(a.CostUSD-b.CostUSD) < 1e-9
}

// golden compares v's indented JSON with the fixture at path.
func golden(t *testing.T, path string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs; rebuilt:\n%s", path, got)
	}
}

// openAIMessages rebuilds the Chat Completions "messages" array: system,
// user (a string, or content parts when there is an image or file),
// assistant with tool_calls (arguments as a JSON string), tool with
// tool_call_id. An entry the runtime typed (input.response, task.result,
// …) is a user message.
func openAIMessages(hist []runtime.Entry) []map[string]any {
	var out []map[string]any
	for _, h := range hist {
		m := map[string]any{"role": h.Role}
		switch h.Role {
		case runtime.RoleAssistant:
			m["content"] = nilIfEmpty(h.Text())
			if len(h.ToolCalls) > 0 {
				var calls []map[string]any
				for _, c := range h.ToolCalls {
					calls = append(calls, map[string]any{"id": c.ID, "type": "function",
						"function": map[string]any{"name": c.Name, "arguments": string(c.Arguments)}})
				}
				m["tool_calls"] = calls
			}
		case runtime.RoleTool:
			m["tool_call_id"], m["content"] = h.ToolCallID, h.Text()
		default:
			m["content"] = openAIContent(h.Content)
		}
		out = append(out, m)
	}
	return out
}

func openAIContent(parts []runtime.Part) any {
	if len(parts) == 1 && parts[0].Type == wire.PartText {
		return parts[0].Text
	}
	var out []map[string]any
	for _, p := range parts {
		switch p.Type {
		case wire.PartText:
			out = append(out, map[string]any{"type": "text", "text": p.Text})
		case wire.PartImage:
			out = append(out, map[string]any{"type": "image_url", "image_url": map[string]any{"url": p.URL}})
		default:
			out = append(out, map[string]any{"type": "file", "file": map[string]any{"filename": p.Name, "file_url": p.URL}})
		}
	}
	return out
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// anthropicRequest rebuilds a Messages API request body's "system" and
// "messages": system entries join into system; assistant content blocks
// are text and tool_use (input as the JSON object); a tool entry is a
// tool_result block in a user message; consecutive messages of one role
// merge, as the API wants them alternating.
func anthropicRequest(hist []runtime.Entry) map[string]any {
	var system []string
	var msgs []map[string]any
	for _, h := range hist {
		role, blocks := "user", anthropicBlocks(h)
		switch h.Role {
		case runtime.RoleSystem:
			system = append(system, h.Text())
			continue
		case runtime.RoleAssistant:
			role = "assistant"
		}
		if n := len(msgs); n > 0 && msgs[n-1]["role"] == role {
			msgs[n-1]["content"] = append(msgs[n-1]["content"].([]map[string]any), blocks...)
			continue
		}
		msgs = append(msgs, map[string]any{"role": role, "content": blocks})
	}
	return map[string]any{"system": strings.Join(system, "\n"), "messages": msgs}
}

func anthropicBlocks(h runtime.Entry) []map[string]any {
	if h.Role == runtime.RoleTool {
		return []map[string]any{{"type": "tool_result", "tool_use_id": h.ToolCallID, "content": h.Text(), "is_error": h.IsError}}
	}
	var out []map[string]any
	for _, p := range h.Content {
		switch p.Type {
		case wire.PartText:
			out = append(out, map[string]any{"type": "text", "text": p.Text})
		case wire.PartImage:
			out = append(out, map[string]any{"type": "image", "source": map[string]any{"type": "url", "url": p.URL}})
		default:
			out = append(out, map[string]any{"type": "document", "source": map[string]any{"type": "url", "url": p.URL}})
		}
	}
	for _, c := range h.ToolCalls {
		out = append(out, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": c.Arguments})
	}
	return out
}
