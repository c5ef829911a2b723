package wire

import (
	"errors"
	"strings"
	"testing"
	"time"
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

// A step request of protocol version 1 carries its inputs without the
// parent and child of inbox version 2 and the tag of version 3:
// AgentInputs leaves them out, and the request then passes the frozen
// schema a version-1 worker holds.
func TestAgentInputsLeaveOutSubagents(t *testing.T) {
	in := []TurnInput{
		{Seq: 1, ID: "c1", Kind: KindDeliver, Text: "hi", Parent: &ParentRef{SessionID: "p", Handle: "h", Depth: 1}},
		{Seq: 2, ID: "c2", Kind: KindChildResult, Child: &ChildRef{Handle: "h", SessionID: "s2", Outcome: ChildDone}},
		{Seq: 4, ID: "c4", Kind: KindTag, Tag: &Tag{Remove: []string{"env"}}},
		{Seq: 3, ID: "c3", Kind: KindCancel},
	}
	out := AgentInputs(in)
	if out[0].Parent != nil || out[1].Child != nil || out[2].Tag != nil || in[0].Parent == nil || in[1].Child == nil || in[2].Tag == nil {
		t.Fatalf("AgentInputs: %+v (from %+v)", out, in)
	}
	plain := in[3:]
	if got := AgentInputs(plain); &got[0] != &plain[0] {
		t.Fatal("AgentInputs copied inputs it did not change")
	}
	req := AgentStepRequest{V: AgentProtocolVersion, Token: "t1", DeploymentID: "d", SessionID: "s", TurnID: "t", Step: 1,
		Inputs: out, HeartbeatMs: 1000, Deadline: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		Subjects: AgentStepSubjects{Delta: "a", Heartbeat: "b", Journal: "c", Cancel: "d", History: "e"}}
	b, err := EncodeAgent(req)
	if err != nil {
		t.Fatal(err)
	}
	var back AgentStepRequest
	if err := DecodeAgent("step_request", b, &back); err != nil {
		t.Fatalf("stripped request: %v", err)
	}
	req.Inputs = in
	if b, _ = EncodeAgent(req); DecodeAgent("step_request", b, &back) == nil {
		t.Fatal("a request with a parent reference passes the frozen version-1 schema")
	}
	req.Inputs = in[2:3]
	if b, _ = EncodeAgent(req); DecodeAgent("step_request", b, &back) == nil {
		t.Fatal("a request with a tag passes the frozen version-1 schema")
	}
}
