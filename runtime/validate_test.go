package runtime_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

type note struct {
	Text string `json:"text"`
}

func TestCheckerRules(t *testing.T) {
	reg := wire.DefaultEvents()
	if err := wire.RegisterEvent[note](reg, "my.note", nil); err != nil {
		t.Fatal(err)
	}
	c := runtime.NewChecker(reg, []string{"my.note", wire.EventTurnCompleted})
	ok := runtime.StepResult{Outcome: runtime.OutcomeDone}
	with := func(f func(*runtime.StepResult)) runtime.StepResult { r := ok; f(&r); return r }
	events := func(es ...runtime.Event) runtime.StepResult {
		return with(func(r *runtime.StepResult) { r.Events = es })
	}
	raw := func(kind, data string) runtime.Event { return runtime.Event{Kind: kind, Data: json.RawMessage(data)} }
	many := func(n int, text string) []runtime.Event {
		out := make([]runtime.Event, n)
		for i := range out {
			out[i] = runtime.Output(text)
		}
		return out
	}
	for _, tt := range []struct {
		name string
		r    runtime.StepResult
		code string // "" = valid
	}{
		{"plain", ok, ""},
		{"output", events(runtime.Output("hi")), ""},
		{"agent kind", events(runtime.NewEvent("my.note", note{Text: "n"})), ""},
		{"long output goes out of line", events(runtime.Output(strings.Repeat("x", 1<<20))), ""},
		{"512 small events", events(many(wire.MaxStepEvents, "e")...), ""},
		{"state of 1 MiB", with(func(r *runtime.StepResult) { r.State = json.RawMessage(`"` + strings.Repeat("s", 1<<20) + `"`) }), ""},
		{"input with question", with(func(r *runtime.StepResult) { r.Outcome, r.Question = runtime.OutcomeInput, "why?" }), ""},
		{"task", with(func(r *runtime.StepResult) {
			r.Outcome, r.Task = runtime.OutcomeTask, &runtime.TaskSpec{Kind: "sleep", Duration: time.Second}
		}), ""},
		{"unregistered kind", events(raw("other.kind", `{}`)), runtime.CodeEventInvalid},
		{"reserved built-in kind", events(raw(wire.EventTurnCompleted, `{"turnId":"t1"}`)), runtime.CodeEventInvalid},
		{"unknown field", events(raw(wire.EventMessageOutput, `{"content":"x"}`)), runtime.CodeEventInvalid},
		{"unknown field beside text", events(raw(wire.EventMessageOutput, `{"text":"x","content":"x"}`)), runtime.CodeEventInvalid},
		{"wrong type", events(raw(wire.EventMessageOutput, `{"text":5}`)), runtime.CodeEventInvalid},
		{"empty text", events(raw(wire.EventMessageOutput, `{"text":""}`)), runtime.CodeEventInvalid},
		{"no data", events(runtime.Event{Kind: wire.EventMessageOutput}), runtime.CodeEventInvalid},
		{"agent ref", events(raw(wire.EventMessageOutput, `{"ref":{"digest":"sha256:`+strings.Repeat("0", 64)+`","size":1}}`)), runtime.CodeEventInvalid},
		{"agent kind unknown field", events(raw("my.note", `{"text":"x","y":1}`)), runtime.CodeEventInvalid},
		{"agent kind not an object", events(raw("my.note", `[1]`)), runtime.CodeEventInvalid},
		{"event over the data limit", events(runtime.NewEvent("my.note", note{Text: strings.Repeat("x", wire.MaxEventDataBytes)})), runtime.CodeEventTooLarge},
		{"output over 8 MiB", events(runtime.Output(strings.Repeat("x", wire.MaxOutputBytes+1))), runtime.CodeEventTooLarge},
		{"too many events", events(many(wire.MaxStepEvents+1, "e")...), runtime.CodeEventTooLarge},
		{"too much event data", events(many(20, strings.Repeat("x", 7<<10))...), runtime.CodeEventTooLarge},
		{"unknown outcome", with(func(r *runtime.StepResult) { r.Outcome = "maybe" }), runtime.CodeResultInvalid},
		{"question without input", with(func(r *runtime.StepResult) { r.Question = "why?" }), runtime.CodeResultInvalid},
		{"task without task outcome", with(func(r *runtime.StepResult) { r.Task = &runtime.TaskSpec{} }), runtime.CodeResultInvalid},
		{"attempt without authorize", with(func(r *runtime.StepResult) { r.AttemptID = "a1" }), runtime.CodeResultInvalid},
		{"long request ID", with(func(r *runtime.StepResult) { r.Outcome, r.RequestID = runtime.OutcomeInput, strings.Repeat("r", 65) }), runtime.CodeResultInvalid},
		{"negative task duration", with(func(r *runtime.StepResult) {
			r.Outcome, r.Task = runtime.OutcomeTask, &runtime.TaskSpec{Duration: -time.Second}
		}), runtime.CodeResultInvalid},
		{"state not JSON", with(func(r *runtime.StepResult) { r.State = json.RawMessage(`{`) }), runtime.CodeResultInvalid},
		{"state over 8 MiB", with(func(r *runtime.StepResult) {
			r.State = json.RawMessage(`"` + strings.Repeat("s", wire.MaxStateBytes) + `"`)
		}), runtime.CodeResultInvalid},
		{"bad alias", with(func(r *runtime.StepResult) { r.Aliases = []string{strings.Repeat("é", 300)} }), runtime.CodeResultInvalid},
		{"too many aliases", with(func(r *runtime.StepResult) { r.Aliases = strings.Split(strings.Repeat("a,", 17), ",") }), runtime.CodeResultInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := c.Check(tt.r)
			if got.Code != tt.code || (tt.code != "") != (got.Error != "") {
				t.Fatalf("code %q error %q, want code %q", got.Code, got.Error, tt.code)
			}
			if tt.code != "" && (len(got.Events) > 0 || got.State != nil || got.Aliases != nil) {
				t.Fatalf("a failed step kept its content: %+v", got)
			}
		})
	}
}

// An agent's own error passes through without a code, its message cut.
func TestCheckerAgentError(t *testing.T) {
	c := runtime.NewChecker(nil, nil)
	got := c.Check(runtime.StepResult{Error: strings.Repeat("e", 10<<10), Events: []runtime.Event{runtime.Output("x")}})
	if got.Code != "" || len(got.Error) > runtime.MaxErrorMessageBytes+4 || got.Events != nil {
		t.Fatalf("%+v", got)
	}
	if got := c.Check(runtime.StepResult{Fatal: true}); !got.Fatal || got.Error == "" {
		t.Fatalf("fatal: %+v", got)
	}
}

// Every built-in kind wire registers is the runtime's: an agent that
// declares one may not emit it, even with a body the kind accepts. Before
// Reserved asked wire, session.tagged and the quarantine's kinds were
// missing from it, and an agent could commit a session.tagged event no tag
// command made.
func TestEveryBuiltinKindReserved(t *testing.T) {
	for _, k := range runtime.BuiltinEvents() {
		if !wire.IsBuiltinEvent(k) {
			t.Errorf("the machine's kind %q is not a wire built-in", k)
		}
	}
	for _, k := range wire.DefaultEvents().Kinds() {
		if !runtime.Reserved(k) {
			t.Errorf("runtime.Reserved(%q) = false for a built-in kind", k)
		}
	}
	// Bodies each kind accepts (wire's own check), so only the
	// reservation can refuse the step.
	valid := map[string]string{
		wire.EventSessionTagged:  `{"tags":{"team":"a"}}`,
		wire.EventSessionRetried: `{"deploymentId":"v1"}`,
	}
	for kind, data := range valid {
		if err := wire.DefaultEvents().ValidateData(kind, []byte(data)); err != nil {
			t.Fatalf("%s %s is not a valid body: %v", kind, data, err)
		}
		c := runtime.NewChecker(nil, []string{kind})
		r := c.Check(runtime.StepResult{Outcome: runtime.OutcomeDone, Events: []runtime.Event{{Kind: kind, Data: json.RawMessage(data)}}})
		if r.Code != runtime.CodeEventInvalid {
			t.Errorf("a step emitting %s %s: code %q, error %q; want %s", kind, data, r.Code, r.Error, runtime.CodeEventInvalid)
		}
	}
}
