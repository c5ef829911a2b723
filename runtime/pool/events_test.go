package pool

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/wire"
)

// The default registry accepts the agent's own kinds with any object as data
// (the demo's demo.slept was once silently left unregistered, so the first
// /sleep step stopped its session at the publish).
func TestDefaultRegistryHasAgentKinds(t *testing.T) {
	reg, err := agentEvents(&demo.Agent{})
	if err != nil {
		t.Fatal(err)
	}
	ev := wire.Event{SessionID: "S1", Seq: 1, Time: time.Now().UTC(), OwnerRunID: "r", DeploymentID: "v1", Kind: demo.EventSlept, V: 1}
	for data, ok := range map[string]bool{`{"duration":"2s"}`: true, `{}`: true, `{"a":{"b":[1]}}`: true, `[1]`: false, `"x"`: false} {
		ev.Data = json.RawMessage(data)
		b, err := wire.EncodeEvent(reg, ev)
		if (err == nil) != ok {
			t.Fatalf("encode %s: %v", data, err)
		}
		if err == nil {
			if _, err := wire.DecodeEvent(reg, b); err != nil {
				t.Fatalf("decode %s: %v", data, err)
			}
		}
	}
	if _, err := agentEvents(kindsAgent{"Bad Kind"}); err == nil {
		t.Fatal("an invalid agent kind was accepted")
	}
}

type kindsAgent []string

func (k kindsAgent) EventKinds() []string { return k }
func (kindsAgent) Step(context.Context, runtime.StepInput) (runtime.StepResult, error) {
	return runtime.StepResult{}, nil
}
