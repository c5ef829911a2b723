package agentapi_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/baton-rt/baton/wire"
)

// Every payload kind a channel sends — text, image and file parts, context,
// outputSchema, ext, a plain text message — reaches the agent's StepInput
// unchanged from POST /v1/deliveries, and the runtime's user entry holds
// the message parts.
func TestPayloadsReachTheAgent(t *testing.T) {
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create("v1")
	cases := []string{
		`[{"message":"plain text"}]`,
		`[{"message":[{"type":"text","text":"look at this"},{"type":"image","url":"https://example.com/a.png","mediaType":"image/png"},` +
			`{"type":"file","url":"https://example.com/r.pdf","mediaType":"application/pdf","name":"r.pdf"}]}]`,
		`[{"message":"with context","context":["channel: #ops","user: ada"]}]`,
		`[{"message":"answer as JSON","outputSchema":{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"]}}]`,
		`[{"message":"from slack","ext":{"slack":{"channel":"C123","ts":"1700000000.000100"},"custom":[1,2,{"x":null}]}}]`,
		`[{"message":"first"},{"message":[{"type":"text","text":"second"}],"context":["c"]}]`,
	}
	for i, ps := range cases {
		e.deliver("v1", id, `{"payloads":`+ps+`}`)
		e.turns(id, i+1)
	}
	steps := e.agent.seen(id)
	if len(steps) != len(cases) {
		t.Fatalf("%d steps ran, want %d", len(steps), len(cases))
	}
	for i, ps := range cases {
		var sent []wire.Payload
		e.h.Check(json.Unmarshal([]byte(ps), &sent))
		in := steps[i].Inputs
		if len(in) != 1 || !reflect.DeepEqual(in[0].Payloads, sent) {
			t.Fatalf("case %d: the agent saw %+v\nsent %+v", i, in, sent)
		}
		if got, want := in[0].Text, wire.PayloadText(sent); got != want {
			t.Errorf("case %d: text %q, want %q", i, got, want)
		}
	}
	// The runtime's user entry of the rich delivery: its three parts.
	var user []wire.Part
	for _, h := range steps[1].History {
		if h.Role == "user" {
			user = h.Content
		}
	}
	if len(user) != 3 || user[1].Type != wire.PartImage || user[2].Name != "r.pdf" {
		t.Fatalf("user entry of the rich delivery: %+v", user)
	}
}
