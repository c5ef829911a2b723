// Command extagent is an owner binary of its own module: an echo agent run
// by owner.Main, built by package owner's tests (external_test.go) to show
// that a user's module needs no internal package of Baton.
package main

import (
	"context"

	"github.com/baton-rt/baton/owner"
	"github.com/baton-rt/baton/runtime"
)

// echo answers every delivery with "echo: <its text>" and ends the turn.
type echo struct{}

// EventKinds implements runtime.Agent: echo emits message.output only.
func (echo) EventKinds() []string { return nil }

// Step implements runtime.Agent: one message.output per delivery, and the
// same text as the agent's own history entry (the runtime records the
// delivery; the agent records what it said).
func (echo) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	if err := ctx.Err(); err != nil {
		return runtime.StepResult{}, err
	}
	r := runtime.StepResult{Outcome: runtime.OutcomeDone}
	for _, c := range in.Inputs {
		if c.Kind == runtime.KindDeliver {
			text := "echo: " + c.Text
			r.Events = append(r.Events, runtime.Output(text))
			r.History = append(r.History, runtime.AssistantText(text))
		}
	}
	return r, nil
}

func main() { owner.Main(echo{}) }
