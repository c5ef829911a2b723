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

// Step implements runtime.Agent: one message.output per delivery.
func (echo) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	if err := ctx.Err(); err != nil {
		return runtime.StepResult{}, err
	}
	r := runtime.StepResult{Outcome: runtime.OutcomeDone}
	for _, c := range in.Inputs {
		if c.Kind == runtime.KindDeliver {
			r.Events = append(r.Events, runtime.Output("echo: "+c.Text))
		}
	}
	return r, nil
}

func main() { owner.Main(echo{}) }
