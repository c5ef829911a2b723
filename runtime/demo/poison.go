package demo

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"

	"github.com/baton-rt/baton/runtime"
)

// poison applies the directives that misbehave on purpose, so the runtime's
// containment can be tried by hand and in tests (docs/agent.md):
//
//	/panic           panics in Step
//	/hang            blocks until the step's context ends
//	/big <n>         one more message.output of n bytes of text
//	/badevent        a message.output whose data has an unknown field
//	/bigstate <n>    keeps n bytes of state
//	/manyevents <n>  n more small message.output events
//	/crash           kills the process (exit code CrashExitCode)
func (a *Agent) poison(ctx context.Context, d directive, r runtime.StepResult) (runtime.StepResult, error) {
	switch d.name {
	case "crash":
		a.crash()
	case "panic":
		panic("demo: /panic directive")
	case "hang":
		<-ctx.Done()
		return runtime.StepResult{}, ctx.Err()
	case "big":
		r.Events = append(r.Events, runtime.Output(filler(size(d.arg))))
	case "badevent":
		r.Events = append(r.Events, runtime.Event{Kind: runtime.EventMessageOutput, Data: json.RawMessage(`{"content":"x"}`)})
	case "bigstate":
		r.State = bigState(size(d.arg))
	case "manyevents":
		for i := range size(d.arg) {
			r.Events = append(r.Events, runtime.Output("event "+strconv.Itoa(i+1)))
		}
	}
	return r, nil
}

// CrashExitCode is the exit code of the /crash directive.
const CrashExitCode = 70

// crash ends the process at once, as a fatal runtime error Go cannot
// recover would (a stack overflow, a concurrent map write): no deferred
// function runs, no step result is returned.
func (a *Agent) crash() {
	if a.Exit != nil {
		a.Exit(CrashExitCode)
		return
	}
	os.Exit(CrashExitCode)
}

// size parses a byte or event count; a bad or missing one is zero.
func size(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// filler is n bytes of readable text (at least one byte: an output's text
// is never empty).
func filler(n int) string {
	const line = "Baton keeps this text durable. "
	n = max(n, 1)
	return strings.Repeat(line, n/len(line)+1)[:n]
}

// bigState is a JSON object of about n bytes: {"fill":"…"}.
func bigState(n int) json.RawMessage {
	const overhead = len(`{"fill":""}`)
	return json.RawMessage(`{"fill":"` + filler(max(n-overhead, 1)) + `"}`)
}
