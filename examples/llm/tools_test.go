package main

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/baton-rt/baton/runtime"
)

// remember keeps a value in the agent's durable state (StepResult.State);
// a later step, given that state as the runtime commits it, recalls it; a
// key never remembered is an error result; a step that remembers nothing
// keeps the state (State nil).
func TestRememberRecall(t *testing.T) {
	f := newFake(t)
	a := newAgent(t, f, newTimer())
	f.push(stream(callStart(0, "r1", "remember", `{"key": "city", "value": "Lisbon"}`),
		callStart(1, "r2", "remember", `{"key": "year", "value": 1755}`),
		callStart(2, "r3", "recall", `{"key": "city"}`), stop("tool_calls")))
	r := step(t, a, nil, input(1, `{"memory":{"old":"kept"}}`, userText("remember Lisbon")))
	if want := `{"memory":{"city":"Lisbon","old":"kept","year":"1755"}}`; string(r.State) != want {
		t.Fatalf("state %s, want %s", r.State, want)
	}
	wantResults := []runtime.Entry{runtime.ToolResult("r1", `remembered "city"`, false),
		runtime.ToolResult("r2", `remembered "year"`, false), runtime.ToolResult("r3", "Lisbon", false)}
	if !reflect.DeepEqual(r.History[1:], wantResults) {
		t.Fatalf("results %+v, want %+v (recall sees what the same step remembered)", r.History[1:], wantResults)
	}

	f.push(stream(callStart(0, "r4", "recall", `{"key": "year"}`), callStart(1, "r5", "recall", `{"key": "river"}`), stop("tool_calls")))
	r2 := step(t, a, nil, input(2, string(r.State), userText("when?")))
	want := []runtime.Entry{runtime.ToolResult("r4", "1755", false),
		runtime.ToolResult("r5", `llm: nothing remembered under this key: "river" (keys: city, old, year)`, true)}
	if r2.State != nil || !reflect.DeepEqual(r2.History[1:], want) {
		t.Fatalf("state %s, results %+v; want the state kept and %+v", r2.State, r2.History[1:], want)
	}

	f.push(stream(callStart(0, "r6", "remember", `{"value": "x"}`), stop("tool_calls")))
	r3 := step(t, a, nil, input(3, "", userText("remember x")))
	if e := r3.History[1]; !e.IsError || e.Text() != "llm: invalid tool arguments: remember needs a key" || r3.State != nil {
		t.Fatalf("remember without a key: %+v, state %s", e, r3.State)
	}
	f.push(stream(callStart(0, "r7", "recall", `{"key": "a"}`), stop("tool_calls")))
	if r4, err := a.Step(t.Context(), input(4, `[1,2]`, userText("recall"))); err == nil {
		t.Fatalf("a state that is not this agent's: %+v, want an error", r4)
	}
}

// The history becomes the request's messages in order, each kind of entry
// as Chat Completions wants it: a summary as a system message, a delivery
// with an image as content parts, an input answer as a user message, a
// turn's assistant text and tool results.
func TestRequestMessages(t *testing.T) {
	a := &Agent{cfg: Config{Model: "m", SystemPrompt: "Be brief."}}
	img := []runtime.Part{runtime.TextPart("what is on this map?"), {Type: "image", URL: "https://example.com/map.png", MediaType: "image/png"},
		{Type: "file", URL: "https://example.com/a.pdf", MediaType: "application/pdf", Name: "a.pdf"}}
	hist := []runtime.Entry{
		{Role: runtime.RoleSystem, Kind: runtime.EntrySummary, Content: []runtime.Part{runtime.TextPart("Earlier: greetings.")}},
		{Role: runtime.RoleUser, Content: img},
		runtime.AssistantText("A map of Lisbon."),
		{Role: runtime.RoleUser, Kind: runtime.EntryInputResponse, Content: []runtime.Part{runtime.TextPart(`{"ok":true}`)}},
		{Role: runtime.RoleAssistant, ToolCalls: []runtime.ToolCall{{ID: "c1", Name: "recall", Arguments: json.RawMessage(`{"key":"k"}`)}}},
		runtime.ToolResult("c1", "v", false),
		{Role: runtime.RoleUser},
	}
	b, err := json.Marshal(a.request(input(3, "", hist...)).Messages)
	if err != nil {
		t.Fatal(err)
	}
	var got []any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	var want []any
	if err := json.Unmarshal([]byte(`[
		{"role": "system", "content": "Be brief."},
		{"role": "system", "content": "Earlier: greetings."},
		{"role": "user", "content": [
			{"type": "text", "text": "what is on this map?"},
			{"type": "image_url", "image_url": {"url": "https://example.com/map.png"}},
			{"type": "text", "text": "[file a.pdf (application/pdf): https://example.com/a.pdf]"}]},
		{"role": "assistant", "content": "A map of Lisbon."},
		{"role": "user", "content": "{\"ok\":true}"},
		{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "recall", "arguments": "{\"key\":\"k\"}"}}]},
		{"role": "tool", "tool_call_id": "c1", "content": "v"},
		{"role": "user", "content": ""}]`), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("messages\n%s", b)
	}
}
