package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/baton-rt/baton/runtime"
)

// EventSlept is the demo's own event kind, emitted after a /sleep step.
const EventSlept = "demo.slept"

// ExecLog records which step ran in which process (the test aids'
// execution log: internal/execlog's MemLog and FileLog, bin/owner
// --exec-log), so tests can prove that no committed step ran twice.
type ExecLog interface {
	Record(sessionID, stepKey, process string)
}

// Agent is the demo agent. The zero value works: it sleeps on a real timer
// and keeps no execution log.
type Agent struct {
	Log     ExecLog // optional
	Process string  // recorded in Log
	// Sleep replaces the real sleep (tests); it must honour ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Exit replaces os.Exit for the /crash directive (in-process tests);
	// it must not return normally for the crash to be real.
	Exit func(code int)
	// Effects records each real execution of an /effects call (optional).
	Effects interface{ Record(Effect) }

	flaky attempts // /flaky: the attempts of each step in this process
}

var _ runtime.Agent = (*Agent)(nil)

// EventKinds implements [runtime.Agent].
func (a *Agent) EventKinds() []string { return []string{EventSlept} }

// Step implements [runtime.Agent].
func (a *Agent) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	if a.Log != nil {
		a.Log.Record(in.SessionID, in.Key(), a.Process)
	}
	r := runtime.StepResult{Outcome: runtime.OutcomeDone}
	var last directive
	for _, c := range in.Inputs {
		text := render(c)
		d := parse(c)
		switch d.name {
		case "stream", "streamsleep":
			streamWords(in.Stream(ctx), text)
		case "flood":
			flood(in.Stream(ctx), d.arg)
		}
		r.Events = append(r.Events, runtime.Output(text))
		r.History = append(r.History, runtime.AssistantText(text)) // what it said, as the model's turn
		if d.name != "" {
			last = d
		}
	}
	if err := ctx.Err(); err != nil {
		return runtime.StepResult{}, err
	}
	if last.name == "" && workLeft(in.State) { // the next step of a /work
		last = directive{name: "work"}
	}
	return a.apply(ctx, in, last, r)
}

// apply turns the deciding directive into the step's outcome.
func (a *Agent) apply(ctx context.Context, in runtime.StepInput, d directive, r runtime.StepResult) (runtime.StepResult, error) {
	switch d.name {
	case "sleep":
		return a.sleep(ctx, d.arg, r)
	case "ask":
		r.Outcome, r.Question = runtime.OutcomeInput, d.arg
	case "authorize":
		r.Outcome = runtime.OutcomeAuthorize
	case "task":
		r.Outcome, r.Task = runtime.OutcomeTask, &runtime.TaskSpec{Kind: "sleep", Duration: duration(d.arg)}
	case "fetch":
		input, _ := json.Marshal(FetchInput{URL: d.arg})
		r.Outcome, r.Task = runtime.OutcomeTask, &runtime.TaskSpec{Kind: TaskFetch, Input: input}
	case "fail":
		return runtime.StepResult{}, ErrFail
	case "flaky":
		return a.flakyStep(in, d.arg, r)
	case "done":
		r.Outcome = runtime.OutcomeFinish
	case "alias":
		r.Aliases = []string{d.arg}
	case "stream", "flood":
	case "effects":
		return a.effects(ctx, in, d.arg, r)
	case "streamsleep":
		arg, _, _ := strings.Cut(d.arg, " ")
		return a.sleep(ctx, arg, r)
	case "spawn", "continue":
		r.Delegate = delegate(d.arg, true)
	case "spawnbg":
		r.Delegate = delegate(d.arg, false)
	case "close":
		r.Close = []string{d.arg}
	case "work":
		return a.work(ctx, in, d.arg, r)
	default:
		return a.poison(ctx, d, r)
	}
	return r, nil
}

func (a *Agent) sleep(ctx context.Context, arg string, r runtime.StepResult) (runtime.StepResult, error) {
	d := duration(arg)
	if err := a.wait(ctx, d); err != nil {
		return runtime.StepResult{}, err
	}
	r.Events = append(r.Events, runtime.NewEvent(EventSlept, runtime.Fields{"duration": d.String()}))
	r.Outcome = runtime.OutcomeContinue
	return r, nil
}

func (a *Agent) wait(ctx context.Context, d time.Duration) error {
	if a.Sleep != nil {
		return a.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

type directive struct{ name, arg string }

// parse reads a directive from a delivery's text: "/name arg...".
func parse(c runtime.Command) directive {
	if c.Kind != runtime.KindDeliver || !strings.HasPrefix(c.Text, "/") {
		return directive{}
	}
	name, arg, _ := strings.Cut(strings.TrimPrefix(c.Text, "/"), " ")
	switch name {
	case "sleep", "ask", "authorize", "task", "fail", "flaky", "done", "alias",
		"panic", "hang", "big", "badevent", "bigstate", "manyevents", "crash", "stream", "streamsleep", "flood", "effects", "fetch",
		"spawn", "spawnbg", "continue", "close", "work":
		return directive{name: name, arg: strings.TrimSpace(arg)}
	}
	return directive{}
}

func render(c runtime.Command) string {
	switch c.Kind {
	case runtime.KindInputResponse:
		return "input " + c.RequestID + ": " + string(c.Value)
	case runtime.KindAuthCallback:
		return "authorization " + c.AttemptID + ": " + c.AuthResult
	case runtime.KindTaskResult:
		return "task " + c.TaskID + ": " + string(c.Value) + c.TaskError
	case runtime.KindChildResult:
		return runtime.ChildResultText(c.Child)
	}
	return c.Text
}

// delegate reads "<handle>[@<deployment>][#<k>=<v>,…] <text>": the child
// runs text as its own delivery; a new child starts with the tags after
// "#" ("#" alone: none) instead of the parent's.
func delegate(arg string, wait bool) *runtime.Delegate {
	handle, text, _ := strings.Cut(arg, " ")
	handle, spec, named := strings.Cut(handle, "#")
	handle, dep, _ := strings.Cut(handle, "@")
	d := &runtime.Delegate{Handle: handle, DeploymentID: dep, Text: strings.TrimSpace(text), Wait: wait}
	if named {
		d.Tags = map[string]string{}
		for kv := range strings.SplitSeq(spec, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				d.Tags[k] = v
			}
		}
	}
	return d
}

// effects makes n journaled calls (arg "<n> <dur>", n ≤ 64), each
// sleeping dur (honouring ctx) and recording its real execution in the
// effects log; a replayed call records nothing. Call i's result is
// "effect i done by <process>" (the process that executed it); the step's
// output lists the results.
func (a *Agent) effects(ctx context.Context, in runtime.StepInput, arg string, r runtime.StepResult) (runtime.StepResult, error) {
	ns, ds, _ := strings.Cut(arg, " ")
	n, _ := strconv.Atoi(ns)
	n, d := min(max(n, 0), 64), duration(strings.TrimSpace(ds))
	var results []string
	for i := 1; i <= n; i++ {
		res, err := in.Do(ctx, "effect", func(ctx context.Context, key string) ([]byte, error) {
			if err := a.wait(ctx, d); err != nil {
				return nil, err
			}
			if a.Effects != nil {
				a.Effects.Record(Effect{SessionID: in.SessionID, StepKey: in.Key(), Call: i, Key: key})
			}
			return []byte(fmt.Sprintf("effect %d done by %s", i, a.Process)), nil
		})
		if err != nil {
			return runtime.StepResult{}, err
		}
		results = append(results, string(res))
	}
	r.Events = append(r.Events, runtime.Output(strings.Join(results, "; ")))
	return r, nil
}

// streamWords sends text as live deltas, a word (with its trailing space)
// each: they concatenate to text.
func streamWords(live runtime.Stream, text string) {
	for _, w := range strings.SplitAfter(text, " ") {
		live.Text(w)
	}
}

// flood sends n bytes (arg, at most 16 MiB) of live deltas of 4 KiB,
// output that never becomes durable (a load for live clients).
func flood(live runtime.Stream, arg string) {
	n, _ := strconv.Atoi(arg)
	n = min(max(n, 0), 16<<20)
	piece := strings.Repeat("~", 4<<10)
	for ; n > 0; n -= len(piece) {
		live.Text(piece[:min(n, len(piece))])
	}
}

// duration parses a Go duration; a bad or missing one is zero.
func duration(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0
	}
	return d
}
