package runtime_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"pgregory.net/rapid"
)

func sprintf(format string, a ...any) string { return fmt.Sprintf(format, a...) }
func sprint(a ...any) string                 { return fmt.Sprint(a...) }

var genKinds = []runtime.Kind{
	runtime.KindDeliver, runtime.KindDeliver, runtime.KindDeliver, runtime.KindDeliver,
	runtime.KindDeliver, runtime.KindDeliver, runtime.KindDeliver, runtime.KindDeliver,
	runtime.KindCancel, runtime.KindReset, runtime.KindClear, runtime.KindCompact,
	runtime.KindInputResponse, runtime.KindInputResponse, runtime.KindAuthCallback,
	runtime.KindAuthCallback, runtime.KindTaskResult, runtime.KindTaskResult,
	runtime.KindTimeout, runtime.KindPause, runtime.KindResume, runtime.KindMove,
	runtime.KindConfigure,
}

// genCommand draws a command; answers mostly target the live waits.
func (w *world) genCommand() runtime.Command {
	t, v := w.t, w.view()
	c := w.command(rapid.SampledFrom(genKinds).Draw(t, "kind"), nil)
	c.Seq += uint64(rapid.IntRange(0, 2).Draw(t, "gap")) // other sessions' traffic
	c.ID = fmt.Sprintf("c%d", c.Seq)
	c.Deployment = rapid.SampledFrom([]string{"A", "A", "A", "B"}).Draw(t, "dep")
	c.Caller = rapid.SampledFrom([]string{"", "", "bob"}).Draw(t, "caller")
	switch c.Kind {
	case runtime.KindDeliver:
		c.Mode, c.Text = w.genMode(), "hi"
		if c.Mode == runtime.ModeDebounce {
			c.DebounceMs = genDebounceMs(t, "debounceMs")
		}
	case runtime.KindConfigure:
		w.genConfigure(&c)
	case runtime.KindInputResponse:
		c.RequestID, c.Value = pick(t, v.Waits.Input != nil, func() string { return v.Waits.Input.RequestID }), json.RawMessage(`"yes"`)
	case runtime.KindAuthCallback:
		c.AttemptID, c.AuthResult = pick(t, v.Waits.Auth != nil, func() string { return v.Waits.Auth.AttemptID }), "granted"
	case runtime.KindTaskResult:
		c.TaskID = pick(t, len(v.Waits.Tasks) > 0, func() string { return v.Waits.Tasks[0].ID })
	case runtime.KindTimeout:
		c.TimerID = pick(t, v.Timer != nil, func() string { return v.Timer.ID })
	case runtime.KindMove:
		c.Target = rapid.SampledFrom([]string{"A", "B"}).Draw(t, "target")
	}
	return w.mangle(c)
}

var floodModes = []string{
	runtime.ModeSteer, runtime.ModeSteer, runtime.ModeSteer, runtime.ModeSteer, runtime.ModeSteer,
	runtime.ModeSteer, runtime.ModeSteer, runtime.ModeLatest, runtime.ModeInterrupt, runtime.ModeDebounce,
}

var floodKinds = []runtime.Kind{
	runtime.KindPause, runtime.KindResume, runtime.KindPause, runtime.KindResume,
	runtime.KindPause, runtime.KindResume, runtime.KindDeliver, runtime.KindDeliver,
	runtime.KindCancel, runtime.KindInputResponse, runtime.KindTaskResult,
	runtime.KindCompact, runtime.KindClear, runtime.KindReset,
}

// genFlood draws one command of a flood: mostly pause and resume, steering
// deliveries (now and then a latest, interrupt or debounce one), answers,
// and now and then a cancel, reset, clear or compact.
func (w *world) genFlood() runtime.Command {
	t, v := w.t, w.view()
	c := w.command(rapid.SampledFrom(floodKinds).Draw(t, "floodKind"), nil)
	switch c.Kind {
	case runtime.KindDeliver:
		c.Mode, c.Text = rapid.SampledFrom(floodModes).Draw(t, "floodMode"), "flood"
		if c.Mode == runtime.ModeDebounce {
			c.DebounceMs = wire.MinDebounceMs
		}
		c.Caller = rapid.SampledFrom([]string{"", "", "bob"}).Draw(t, "floodCaller")
		if rapid.IntRange(0, 19).Draw(t, "floodRefused") == 10 {
			refuse(&c)
		}
	case runtime.KindInputResponse:
		c.RequestID, c.Value = pick(t, v.Waits.Input != nil, func() string { return v.Waits.Input.RequestID }), json.RawMessage(`"yes"`)
	case runtime.KindTaskResult:
		c.TaskID = pick(t, len(v.Waits.Tasks) > 0, func() string { return v.Waits.Tasks[0].ID })
	}
	return c
}

// mangle makes some commands undecodable, refused (a delivery or move
// stamped by another agent's deployment) or duplicates of earlier IDs.
func (w *world) mangle(c runtime.Command) runtime.Command {
	// rapid biases integers toward small values: the rare cases sit mid-range.
	switch d := rapid.IntRange(0, 99).Draw(w.t, "mangle"); {
	case d >= 50 && d < 54:
		c.Rejected = "wire: unknown version"
	case d >= 70 && d < 76 && (c.Kind == runtime.KindDeliver || c.Kind == runtime.KindMove):
		refuse(&c)
	case d >= 60 && d < 66 && len(w.stream) > 0:
		c.ID = rapid.SampledFrom(w.stream).Draw(w.t, "dupOf").ID
	}
	return c
}

// refuse stamps c (a delivery or move) with deployment X of another agent,
// as the driver refuses it: Refused set, the command otherwise intact.
func refuse(c *runtime.Command) {
	c.Refused = runtime.RejectAgentMismatch
	if c.Kind == runtime.KindMove {
		c.Target = "X"
		return
	}
	c.Deployment = "X"
}

// pick returns the live ID (usually) or a stale one.
func pick(t *rapid.T, ok bool, live func() string) string {
	if ok && rapid.IntRange(0, 9).Draw(t, "live") < 8 {
		return live()
	}
	return "stale"
}

var genOutcomes = []string{
	"continue", "continue", "continue", "done", "done", "done", "input", "authorize",
	"task", "task", "finish", "error", "fatal", "badkind", "badoutcome", "transient", "transient",
}

// genResult draws a step result: every outcome, failures and illegal ones.
func (w *world) genResult() runtime.StepResult {
	t := w.t
	o := rapid.SampledFrom(genOutcomes).Draw(t, "outcome")
	r := runtime.StepResult{Outcome: runtime.Outcome(o)}
	for range rapid.SampledFrom([]int{1, 0, 2, 1}).Draw(t, "events") {
		r.Events = append(r.Events, runtime.Output("out"))
		r.History = append(r.History, runtime.AssistantText("out"))
	}
	n := rapid.IntRange(1, 20).Draw(t, "tokens") // never zero: the usage invariants need it
	r.Usage = runtime.Usage{InputTokens: int64(n), OutputTokens: int64(n / 2), CachedTokens: int64(n % 3), CostUSD: 0.25 * float64(n%4+1)}
	switch o {
	case "input":
		r.Question = "q?"
	case "task":
		r.Task = &runtime.TaskSpec{Duration: time.Minute}
	case "error", "fatal":
		r.Outcome, r.Error, r.Fatal = runtime.OutcomeDone, "boom", o == "fatal"
	case "transient": // retried under the world's policy
		r.Outcome, r.Error = runtime.OutcomeDone, "flake"
		r.Code = rapid.SampledFrom([]string{runtime.CodeAgentTimeout, runtime.CodeAgentUnavailable, runtime.CodeAgentRetryable}).Draw(t, "code")
	case "badkind":
		r.Outcome, r.Events = runtime.OutcomeDone, append(r.Events, runtime.NewEvent("turn.completed", nil))
	case "continue":
		r.Events = append(r.Events, runtime.NewEvent("x.custom", runtime.Fields{"n": 1}))
		r.State = json.RawMessage(`{"n":1}`)
	}
	if o == "finish" && rapid.IntRange(0, 2).Draw(t, "finishReally") > 0 {
		r.Outcome = runtime.OutcomeDone // keep most sessions alive longer
	}
	return r
}
