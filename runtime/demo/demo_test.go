package demo_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/baton-rt/baton/internal/execlog"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/demo"
)

func deliver(text string) runtime.Command {
	return runtime.Command{Seq: 1, ID: "c1", Kind: runtime.KindDeliver, Text: text}
}

func step(t *testing.T, a *demo.Agent, inputs ...runtime.Command) (runtime.StepResult, error) {
	t.Helper()
	return a.Step(context.Background(), runtime.StepInput{SessionID: "s", TurnID: "t1", Step: 1, Inputs: inputs})
}

func texts(r runtime.StepResult) []string {
	var out []string
	for _, e := range r.Events {
		if e.Kind == runtime.EventMessageOutput {
			var b struct{ Text string }
			_ = json.Unmarshal(e.Data, &b)
			out = append(out, b.Text)
		}
	}
	return out
}

func TestDirectives(t *testing.T) {
	tests := []struct {
		text    string
		outcome runtime.Outcome
		check   func(runtime.StepResult) bool
	}{
		{"hello", runtime.OutcomeDone, nil},
		{"/ask your name?", runtime.OutcomeInput, func(r runtime.StepResult) bool { return r.Question == "your name?" }},
		{"/authorize", runtime.OutcomeAuthorize, nil},
		{"/task 2s", runtime.OutcomeTask, func(r runtime.StepResult) bool { return r.Task != nil && r.Task.Duration == 2*time.Second }},
		{"/done", runtime.OutcomeFinish, nil},
		{"/alias C1.2", runtime.OutcomeDone, func(r runtime.StepResult) bool { return len(r.Aliases) == 1 && r.Aliases[0] == "C1.2" }},
		{"/sleep 1ms", runtime.OutcomeContinue, func(r runtime.StepResult) bool { return r.Events[1].Kind == demo.EventSlept }},
		{"/unknown x", runtime.OutcomeDone, nil},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			r, err := step(t, &demo.Agent{}, deliver(tt.text))
			if err != nil || r.Outcome != tt.outcome {
				t.Fatalf("outcome %q, %v; want %q", r.Outcome, err, tt.outcome)
			}
			if got := texts(r); len(got) != 1 || got[0] != tt.text {
				t.Fatalf("echo %q, want %q", got, tt.text)
			}
			if tt.check != nil && !tt.check(r) {
				t.Fatalf("bad result %+v", r)
			}
		})
	}
}

func TestFailIsAStepError(t *testing.T) {
	_, err := step(t, &demo.Agent{}, deliver("/fail"))
	if !errors.Is(err, demo.ErrFail) {
		t.Fatalf("err %v, want ErrFail", err)
	}
	done, _ := runtime.Run(context.Background(), &demo.Agent{}, runtime.StepInput{TurnID: "t1", Step: 1, Inputs: []runtime.Command{deliver("/fail")}})
	if done.Result.Error == "" || done.TurnID != "t1" || done.Step != 1 {
		t.Fatalf("Run: %+v", done)
	}
}

// /flaky n fails the step's first n attempts with a retryable error
// (runtime.Run gives it code agent_retryable), counted per step; the next
// attempt echoes. /fail's error is not retryable.
func TestFlakyIsRetryable(t *testing.T) {
	a := &demo.Agent{}
	in := runtime.StepInput{SessionID: "s", TurnID: "t1", Step: 1, Inputs: []runtime.Command{deliver("/flaky 2")}}
	for attempt := 1; attempt <= 2; attempt++ {
		done, _ := runtime.Run(context.Background(), a, in)
		if done.Result.Code != runtime.CodeAgentRetryable || !strings.Contains(done.Result.Error, "attempt") {
			t.Fatalf("attempt %d: %+v, want agent_retryable", attempt, done.Result)
		}
	}
	other := in
	other.SessionID = "s2"
	if done, _ := runtime.Run(context.Background(), a, other); done.Result.Code != runtime.CodeAgentRetryable {
		t.Fatalf("another session's step counts its own attempts: %+v", done.Result)
	}
	done, _ := runtime.Run(context.Background(), a, in)
	if done.Result.Error != "" || done.Result.Outcome != runtime.OutcomeDone || texts(done.Result)[0] != "/flaky 2" {
		t.Fatalf("attempt 3: %+v, want the echo", done.Result)
	}
	_, err := step(t, &demo.Agent{}, deliver("/flaky"))
	if !errors.Is(err, demo.ErrFlaky) || !runtime.IsRetryable(err) {
		t.Fatalf("/flaky: %v, want ErrFlaky marked retryable", err)
	}
	if _, err := step(t, &demo.Agent{}, deliver("/fail")); runtime.IsRetryable(err) {
		t.Fatal("/fail is retryable")
	}
}

func TestSleepHonoursCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := (&demo.Agent{}).Step(ctx, runtime.StepInput{Inputs: []runtime.Command{deliver("/sleep 1h")}})
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
}

func TestContinuationAndAnswers(t *testing.T) {
	r, err := step(t, &demo.Agent{})
	if err != nil || r.Outcome != runtime.OutcomeDone || len(r.Events) != 0 {
		t.Fatalf("continuation: %+v %v", r, err)
	}
	in := []runtime.Command{
		{Kind: runtime.KindInputResponse, RequestID: "q1", Value: json.RawMessage(`"Ada"`)},
		{Kind: runtime.KindAuthCallback, AttemptID: "a1", AuthResult: "granted"},
		{Kind: runtime.KindTaskResult, TaskID: "k1", Value: json.RawMessage(`42`)},
		deliver("steered"),
	}
	r, _ = step(t, &demo.Agent{}, in...)
	want := []string{`input q1: "Ada"`, "authorization a1: granted", "task k1: 42", "steered"}
	if got := texts(r); len(got) != 4 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestExecLog(t *testing.T) {
	log := &execlog.MemLog{}
	a := &demo.Agent{Log: log, Process: "p1", Sleep: func(context.Context, time.Duration) error { return nil }}
	_, _ = step(t, a, deliver("/sleep 1h"))
	_, _ = step(t, a, deliver("x"))
	if n := log.Count("s", "t1/1"); n != 2 {
		t.Fatalf("count %d, want 2", n)
	}
	if e := log.Entries(); e[0].Process != "p1" || e[0].StepKey != "t1/1" {
		t.Fatalf("entries %+v", e)
	}
	if k := a.EventKinds(); len(k) != 1 || k[0] != demo.EventSlept {
		t.Fatalf("kinds %v", k)
	}
}

// /crash ends the process from inside the step (os.Exit(70) unless
// replaced): no result comes back.
func TestCrashExits(t *testing.T) {
	code := make(chan int, 1)
	a := &demo.Agent{Exit: func(c int) {
		code <- c
		goruntime.Goexit() // as the process would end: the step never returns
	}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = step(t, a, deliver("/crash"))
		t.Error("the step returned after /crash")
	}()
	<-done
	if c := <-code; c != 70 {
		t.Fatalf("exit code %d", c)
	}
}

// sink records deltas.
type sink struct{ deltas []string }

func (s *sink) Text(d string) { s.deltas = append(s.deltas, d) }

func TestStreamDirectives(t *testing.T) {
	var s sink
	ctx := runtime.WithSink(context.Background(), &s)
	in := runtime.StepInput{TurnID: "t1", Step: 1, Inputs: []runtime.Command{deliver("/stream a b")}}
	r, err := (&demo.Agent{}).Step(ctx, in)
	if err != nil || r.Outcome != runtime.OutcomeDone || strings.Join(s.deltas, "") != "/stream a b" || len(s.deltas) != 3 {
		t.Fatalf("/stream: %+v %v, deltas %q", r, err, s.deltas)
	}
	s.deltas = nil
	in.Inputs = []runtime.Command{deliver("/flood 10000")}
	if _, err := (&demo.Agent{}).Step(ctx, in); err != nil || len(strings.Join(s.deltas, "")) != 10000 || len(s.deltas) != 3 {
		t.Fatalf("/flood 10000: %v, %d deltas", err, len(s.deltas))
	}
}
