package session_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
)

// syncBuffer is a bytes.Buffer safe for the log handler and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// logging logs one line through the step's logger.
type logging struct{}

func (logging) EventKinds() []string { return nil }

func (logging) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	runtime.Logger(ctx).Info("agent line", "input", in.Inputs[0].Text)
	return runtime.StepResult{Outcome: runtime.OutcomeDone, Events: []runtime.Event{runtime.Output("logged")}}, nil
}

// An agent's runtime.Logger(ctx) is the process's log with the session,
// turn and step as attributes; without a driver it discards.
func TestStepLogger(t *testing.T) {
	var buf syncBuffer
	r := newRig(t, func(e *session.Env) {
		e.Agent, e.Log = logging{}, slog.New(slog.NewTextHandler(&buf, nil))
	})
	r.start()
	r.send(deliver("hi"))
	r.eventually("the output", func() bool { return len(r.outputs()) == 1 })
	var line string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "agent line") {
			line = l
		}
	}
	for _, want := range []string{"session=" + r.id, "turn=t1", "step=1", "input=hi"} {
		if !strings.Contains(line, want) {
			t.Fatalf("agent's log line %q lacks %s", line, want)
		}
	}
	runtime.Logger(context.Background()).Info("discarded") // no logger: no panic, nothing
}
