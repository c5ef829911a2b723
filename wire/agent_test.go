package wire

import (
	"errors"
	"strings"
	"testing"
)

func TestDecodeAgentReply(t *testing.T) {
	var r AgentStepReply
	ok := `{"v":1,"outcome":"done","events":[{"kind":"message.output","data":{"text":"hi"}}],"usage":{"inputTokens":3}}`
	if err := DecodeAgent("step_reply", []byte(ok), &r); err != nil {
		t.Fatal(err)
	}
	if r.Outcome != "done" || len(r.Events) != 1 || r.Usage.InputTokens != 3 {
		t.Fatalf("decoded %+v", r)
	}
	for _, tc := range []struct{ name, body, reason string }{
		{"older version", `{"v":0,"outcome":"done"}`, "protocol version 0"},
		{"newer version", `{"v":2,"outcome":"done"}`, "protocol version 2"},
		{"no version", `{"outcome":"done"}`, `no protocol version "v"`},
		{"version as text", `{"v":"1","outcome":"done"}`, "protocol version 1, this owner"},
		{"unknown member", `{"v":1,"outcome":"done","outcom":"x"}`, "outcom"},
		{"bad outcome", `{"v":1,"outcome":"later"}`, "outcome"},
		{"not JSON", `{"v":1,`, "not JSON"},
		{"not an object", `[1]`, "not a JSON object"},
		{"a code", `{"v":1,"error":"x","code":"agent_timeout"}`, "code"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r AgentStepReply
			err := DecodeAgent("step_reply", []byte(tc.body), &r)
			if !errors.Is(err, ErrAgentProtocol) || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("error %v, want ErrAgentProtocol naming %q", err, tc.reason)
			}
		})
	}
}

func TestDecodeAgentShapes(t *testing.T) {
	var hb AgentHeartbeat
	if err := DecodeAgent("heartbeat", []byte(`{}`), &hb); err != nil {
		t.Fatalf("a heartbeat may leave v out: %v", err)
	}
	var j AgentJournalRequest
	if err := DecodeAgent("journal_request", []byte(`{"v":1,"op":"record","position":1,"result":{"a":[1,2]}}`), &j); err != nil || j.Position != 1 || string(j.Result) != `{"a":[1,2]}` {
		t.Fatalf("journal request: %v %+v", err, j)
	}
	if err := DecodeAgent("journal_request", []byte(`{"v":1,"op":"forget"}`), &j); !errors.Is(err, ErrAgentProtocol) {
		t.Fatalf("an unknown op: %v", err)
	}
	if err := DecodeAgent("no_such_shape", []byte(`{}`), &j); !errors.Is(err, ErrAgentProtocol) {
		t.Fatalf("an unknown shape: %v", err)
	}
	for _, name := range AgentSchemaNames() {
		if len(AgentSchema(name)) == 0 {
			t.Errorf("no schema for %s", name)
		}
	}
	if AgentSchema("nope") != nil {
		t.Error("a schema for an unknown shape")
	}
}
