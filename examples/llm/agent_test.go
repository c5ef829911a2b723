package main

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/baton-rt/baton/runtime"
)

// newAgent is an agent of the fake, its waits recorded by tm.
func newAgent(t *testing.T, f *fake, tm *timer, mutate ...func(*Config)) *Agent {
	t.Helper()
	cfg := DefaultConfig()
	cfg.SystemPrompt, cfg.Options, cfg.timer = "You are terse.", f.options(), tm
	for _, m := range mutate {
		m(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func userText(s string) runtime.Entry {
	return runtime.Entry{Role: runtime.RoleUser, Content: []runtime.Part{runtime.TextPart(s)}}
}

// input is step n of turn t1 over hist (the user entries the runtime
// appended included) with state.
func input(n int, state string, hist ...runtime.Entry) runtime.StepInput {
	in := runtime.StepInput{SessionID: "s1", TurnID: "t1", Step: n, History: hist}
	if state != "" {
		in.State = json.RawMessage(state)
	}
	return in
}

// step runs a.Step with s as the step's sink.
func step(t *testing.T, a *Agent, s *sink, in runtime.StepInput) runtime.StepResult {
	t.Helper()
	ctx := t.Context()
	if s != nil {
		ctx = runtime.WithSink(ctx, s)
	}
	r, err := a.Step(ctx, in)
	if err != nil {
		t.Fatalf("Step: %v", err)
	}
	if c := runtime.NewChecker(nil, nil).Check(r); c.Error != r.Error {
		t.Fatalf("the runtime refuses the result %+v: %s (%s)", r, c.Error, c.Code)
	}
	return r
}

// "what is 12*7?": step 1 streams a calculator call in fragments (its
// arguments split over three chunks) and continues the turn with the call
// and its result 84 in the history; step 2's request carries both, and
// its streamed answer is the step's message.output and assistant entry.
// Each step reports its stream's usage.
func TestCalculatorTurn(t *testing.T) {
	f, tm := newFake(t), newTimer()
	a := newAgent(t, f, tm)
	f.push(stream(callStart(0, "call_1", "calculator", `{"expre`), callArgs(0, `ssion": "12`), callArgs(0, `*7"}`),
		stop("tool_calls"), usage(50, 12, 8)))
	hist := []runtime.Entry{userText("what is 12*7?")}
	s := newSink()
	r1 := step(t, a, s, input(1, "", hist...))
	call := runtime.Entry{Role: runtime.RoleAssistant, ToolCalls: []runtime.ToolCall{{ID: "call_1", Name: "calculator", Arguments: json.RawMessage(`{"expression":"12*7"}`)}}}
	want := []runtime.Entry{call, runtime.ToolResult("call_1", "84", false)}
	if r1.Outcome != runtime.OutcomeContinue || !reflect.DeepEqual(r1.History, want) || len(r1.Events) != 0 || r1.State != nil {
		t.Fatalf("step 1: %+v, want continue with the call and its result %+v", r1, want)
	}
	if r1.Usage != (runtime.Usage{InputTokens: 50, OutputTokens: 12, CachedTokens: 8}) {
		t.Fatalf("step 1 usage %+v", r1.Usage)
	}
	req := f.request(1)
	if req["model"] != DefaultModel || req["stream"] != true || !reflect.DeepEqual(req["stream_options"], map[string]any{"include_usage": true}) {
		t.Fatalf("request 1: model %v, stream %v, stream_options %v", req["model"], req["stream"], req["stream_options"])
	}
	if got := toolNames(req); !slices.Equal(got, []string{"calculator", "remember", "recall"}) {
		t.Fatalf("tools %v", got)
	}
	wantMsgs := []string{`{"content":"You are terse.","role":"system"}`, `{"content":"what is 12*7?","role":"user"}`}
	if got := f.messages(1); !slices.Equal(got, wantMsgs) {
		t.Fatalf("request 1 messages\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantMsgs, "\n"))
	}

	f.push(stream(text("12*7 is "), text("84."), stop("stop"), usage(80, 5, 0)))
	r2 := step(t, a, s, input(2, "", append(hist, r1.History...)...))
	wantMsgs = append(wantMsgs,
		`{"role":"assistant","tool_calls":[{"function":{"arguments":"{\"expression\":\"12*7\"}","name":"calculator"},"id":"call_1","type":"function"}]}`,
		`{"content":"84","role":"tool","tool_call_id":"call_1"}`)
	if got := f.messages(2); !slices.Equal(got, wantMsgs) {
		t.Fatalf("request 2 messages\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantMsgs, "\n"))
	}
	if r2.Outcome != runtime.OutcomeDone || !reflect.DeepEqual(r2.Events, []runtime.Event{runtime.Output("12*7 is 84.")}) ||
		!reflect.DeepEqual(r2.History, []runtime.Entry{runtime.AssistantText("12*7 is 84.")}) {
		t.Fatalf("step 2: %+v, want done saying %q", r2, "12*7 is 84.")
	}
	if got := s.all(); !slices.Equal(got, []string{"12*7 is ", "84."}) || r2.Usage != (runtime.Usage{InputTokens: 80, OutputTokens: 5}) {
		t.Fatalf("deltas %q, usage %+v", got, r2.Usage)
	}
	if len(tm.all()) != 0 {
		t.Fatalf("waits %v: nothing was retried", tm.all())
	}
}

func toolNames(req map[string]any) []string {
	var out []string
	ts, _ := req["tools"].([]any)
	for _, tl := range ts {
		fn, _ := tl.(map[string]any)["function"].(map[string]any)
		name, _ := fn["name"].(string)
		out = append(out, name)
	}
	return out
}

// Two tool calls interleaved over the chunks (index 1's fragments between
// index 0's), a call whose arguments are not JSON, one of an unknown tool
// and one without an ID, all answered in the same step: an error result
// for each bad one, the history holding JSON only, and the next request
// sending back the text the model produced.
func TestToolCallAssembly(t *testing.T) {
	f := newFake(t)
	a := newAgent(t, f, newTimer())
	f.push(stream(
		text("Let me check. "),
		callStart(0, "c0", "calculator", `{"expression":`),
		callStart(1, "c1", "calculator", `{"expression": "1/0"}`),
		callArgs(0, ` "2+3*4"}`),
		callStart(2, "c2", "calculator", `{"expression": "2+`),
		callStart(3, "c3", "weather", `{}`),
		callStart(4, "", "calculator", `{"expression": "(1+2)*-3"}`),
		stop("tool_calls"), usage(10, 10, 0)))
	s := newSink()
	r := step(t, a, s, input(1, "", userText("compute")))
	var got []string
	for _, e := range r.History {
		b, _ := json.Marshal(e)
		got = append(got, string(b))
	}
	want := []string{
		`{"role":"assistant","content":[{"type":"text","text":"Let me check. "}],"toolCalls":[` +
			`{"id":"c0","name":"calculator","arguments":{"expression":"2+3*4"}},` +
			`{"id":"c1","name":"calculator","arguments":{"expression":"1/0"}},` +
			`{"id":"c2","name":"calculator","arguments":"{\"expression\": \"2+"},` +
			`{"id":"c3","name":"weather","arguments":{}},` +
			`{"id":"call_t1_1_4","name":"calculator","arguments":{"expression":"(1+2)*-3"}}]}`,
		`{"role":"tool","content":[{"type":"text","text":"14"}],"toolCallId":"c0"}`,
		`{"role":"tool","content":[{"type":"text","text":"calculator: division by zero"}],"toolCallId":"c1","isError":true}`,
		`{"role":"tool","content":[{"type":"text","text":"llm: invalid tool arguments: want a JSON object (unexpected end of JSON input)"}],"toolCallId":"c2","isError":true}`,
		`{"role":"tool","content":[{"type":"text","text":"llm: unknown tool: \"weather\" (tools: calculator, remember, recall)"}],"toolCallId":"c3","isError":true}`,
		`{"role":"tool","content":[{"type":"text","text":"-9"}],"toolCallId":"call_t1_1_4"}`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("history\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r.Outcome != runtime.OutcomeContinue || !reflect.DeepEqual(r.Events, []runtime.Event{runtime.Output("Let me check. ")}) {
		t.Fatalf("outcome %s, events %+v: want continue, the text said", r.Outcome, r.Events)
	}
	f.push(stream(text("Done."), stop("stop")))
	step(t, a, s, input(2, "", append([]runtime.Entry{userText("compute")}, r.History...)...))
	msgs := f.messages(2)
	if !strings.Contains(msgs[2], `"arguments":"{\"expression\": \"2+"`) || !strings.Contains(msgs[2], `"content":"Let me check. "`) {
		t.Fatalf("request 2's assistant message %s: want the arguments as the model sent them, and its text", msgs[2])
	}
}
