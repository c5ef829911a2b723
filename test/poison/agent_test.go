package poison_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// scripted is an agent whose every result is named by the delivery's text,
// "<result> [n]", so a test can draw results at random:
//
//	ok          one small message.output (the valid case)
//	out <n>     one message.output of n bytes (stored out of line above 8 KiB)
//	many <n>    n small message.output events
//	state <n>   keeps n bytes of state
//	kind        an event of a kind the agent did not register
//	field       a message.output with an unknown field
//	type        a message.output whose text is a number
//	bigevent    an agent event whose data is over the event limit
//	panic       panics in Step
//	hang        blocks until the step's context ends (the step timeout)
//	error       returns an error
//	fatal       a fatal step failure (the session ends)
type scripted struct{ log *stepLog }

const eventNote = "poison.note"

func (a *scripted) EventKinds() []string { return []string{eventNote} }

func (a *scripted) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	a.log.Record(in.SessionID, in.Key(), "p1")
	r := runtime.StepResult{Outcome: runtime.OutcomeDone}
	if len(in.Inputs) == 0 {
		return r, nil
	}
	name, arg, _ := strings.Cut(in.Inputs[len(in.Inputs)-1].Text, " ")
	n, _ := strconv.Atoi(arg)
	switch name {
	case "ok":
		r.Events = []runtime.Event{runtime.Output("ok")}
	case "out":
		r.Events = []runtime.Event{outputEvent(n)}
	case "many":
		for i := range n {
			r.Events = append(r.Events, runtime.Output("e"+strconv.Itoa(i)))
		}
	case "state":
		r.State = json.RawMessage(`"` + text(max(n-2, 1)) + `"`)
	case "kind":
		r.Events = []runtime.Event{runtime.NewEvent("unknown.kind", runtime.Fields{"x": 1})}
	case "field":
		r.Events = []runtime.Event{{Kind: wire.EventMessageOutput, Data: json.RawMessage(`{"text":"x","content":"x"}`)}}
	case "type":
		r.Events = []runtime.Event{{Kind: wire.EventMessageOutput, Data: json.RawMessage(`{"text":5}`)}}
	case "bigevent":
		r.Events = []runtime.Event{runtime.NewEvent(eventNote, runtime.Fields{"fill": text(wire.MaxEventDataBytes)})}
	case "panic":
		panic("scripted panic")
	case "hang":
		<-ctx.Done()
		return runtime.StepResult{}, ctx.Err()
	case "error":
		return runtime.StepResult{}, errors.New("scripted error")
	case "fatal":
		return runtime.StepResult{Fatal: true, Error: "scripted fatal"}, nil
	}
	return r, nil
}

func text(n int) string { return strings.Repeat("abcdefghij", n/10+1)[:max(n, 1)] }

// outputs are the encoded message.output events of "out <n>" by n,
// prepared when the result is drawn (prepareOutput): encoding up to 1 MiB
// of text costs a -race build on a loaded machine a good part of the
// 300 ms step timeout, and only "hang" may reach it.
var outputs sync.Map

// prepareOutput encodes the output of "out <n>" ahead of its step.
func prepareOutput(n int) { outputs.LoadOrStore(n, runtime.Output(text(n))) }

// outputEvent is the output of "out <n>", prepared or encoded now.
func outputEvent(n int) runtime.Event {
	if e, ok := outputs.Load(n); ok {
		return e.(runtime.Event)
	}
	return runtime.Output(text(n))
}
