package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/baton-rt/baton/runtime"
)

// workState is the state a /work turn keeps: the steps done by every
// /work so far, the steps this one has left, and each step's sleep.
type workState struct {
	Done  int    `json:"done"`
	Left  int    `json:"left"`
	Sleep string `json:"sleep,omitempty"`
}

func readWork(state json.RawMessage) workState {
	var w workState
	_ = json.Unmarshal(state, &w) // another state: none done
	return w
}

// workLeft reports a /work turn with steps left.
func workLeft(state json.RawMessage) bool { return readWork(state).Left > 0 }

// work runs one step of a /work turn: arg "<n> <dur>" starts one (n ≤
// 64); "" continues the one in the state. The step makes one journaled
// call, sleeps, counts itself, reports a usage of 100 input and 10 output
// tokens, and continues the turn while steps are left.
func (a *Agent) work(ctx context.Context, in runtime.StepInput, arg string, r runtime.StepResult) (runtime.StepResult, error) {
	w := readWork(in.State)
	if arg != "" {
		ns, ds, _ := strings.Cut(arg, " ")
		n, _ := strconv.Atoi(ns)
		w.Left, w.Sleep = min(max(n, 1), 64), strings.TrimSpace(ds)
	}
	if _, err := in.Do(ctx, "work", func(context.Context, string) ([]byte, error) {
		return []byte(strconv.Itoa(w.Done + 1)), nil
	}); err != nil {
		return runtime.StepResult{}, err
	}
	if err := a.wait(ctx, duration(w.Sleep)); err != nil {
		return runtime.StepResult{}, err
	}
	w.Done, w.Left = w.Done+1, w.Left-1
	state, err := json.Marshal(w)
	if err != nil {
		return runtime.StepResult{}, err
	}
	r.State, r.Usage = state, runtime.Usage{InputTokens: 100, OutputTokens: 10}
	r.Events = append(r.Events, runtime.Output(fmt.Sprintf("work %d done", w.Done)))
	if w.Left > 0 {
		r.Outcome = runtime.OutcomeContinue
	}
	return r, nil
}
