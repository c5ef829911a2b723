package session_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/runtime/session/memory"
	"github.com/baton-rt/baton/wire"
	"github.com/oklog/ulid/v2"
)

// A checkpoint written before tasks had kinds (a frozen fixture: state
// version 1, a pending task {id, durationNs}, its task.started in the
// outbox of the last commit) boots on this build: the task is a "sleep" of
// its duration, published again exactly so by the booting run, and its
// result is applied — task.completed with kind sleep and the result, which
// is over the inline limit, so by reference to its blob.
func TestPendingTaskOfAnOldCheckpointRunsAsSleep(t *testing.T) {
	cp, err := os.ReadFile("testdata/pending_sleep_task_v1.json")
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t)
	r.id = "01JTASKFIXTURE000000000000"
	ctx := context.Background()
	rec, err := record.New(r.id, record.Owner{RunID: ulid.Make().String(), Deployment: "v1", Process: "p1", WireV: wire.CurrentVersion}, cp)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := r.records.CreateSession(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= 4; seq++ { // the events before the fixture's outbox
		e, _ := wire.NewEvent(wire.EventSessionWaiting, wire.SessionWaiting{Reason: wire.WaitMessage})
		e.SessionID, e.Seq, e.Time, e.OwnerRunID, e.DeploymentID = r.id, seq, time.Now().UTC(), "01JRUN0000000000000000000A", "v1"
		data, err := wire.EncodeEvent(nil, e)
		if err == nil {
			err = r.events.Appender(r.id).Append(ctx, seq, data)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	d, err := session.ReadCheckpoint(ctx, r.env, r.id, cp)
	if err != nil {
		t.Fatal(err)
	}
	if tasks := d.Snap.Waits.Tasks; len(tasks) != 1 || tasks[0].Kind != wire.TaskSleep || tasks[0].Duration != 150*time.Millisecond {
		t.Fatalf("tasks %+v, want the sleep of 150ms", tasks)
	}
	r.s, err = session.New(r.env, session.Boot{Record: rec, Revision: rev, Checkpoint: d, Tokens: d.Tokens})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() { cancel(); <-r.done })
	go func() { r.done <- r.s.Run(runCtx, runtime.BootRecover) }()
	r.eventually("the task published again", func() bool { return len(r.host.Tasks()) == 1 })
	if got := r.host.Tasks()[0]; got.ID != "t2-1-task" || got.Kind != wire.TaskSleep || got.Duration != 150*time.Millisecond || got.Input != nil {
		t.Fatalf("task published again as %+v", got)
	}
	r.send(deliver("applied before the checkpoint")) // inbox seqs 1 and 2, which the
	r.send(deliver("applied before the checkpoint")) // checkpoint's applied.low 3 skips
	result := `{"kind":"sleep","pad":"` + strings.Repeat("p", wire.MaxInlineTextBytes) + `","sleptMs":150}`
	r.send(wire.Command{Kind: wire.KindTaskResult, ID: "task-r", TaskResult: &wire.TaskResult{TaskID: "t2-1-task", Result: json.RawMessage(result)}})
	r.eventually("task.completed", func() bool { return hasKind(r.stream(), wire.EventTaskCompleted) })
	for _, e := range r.stream() {
		if e.Kind != wire.EventTaskCompleted {
			continue
		}
		var done wire.TaskCompletedV2
		if err := json.Unmarshal(e.Data, &done); err != nil || e.V != 2 || done.Kind != wire.TaskSleep || done.Result != nil || done.ResultRef == nil {
			t.Fatalf("task.completed v%d %.300s: want kind sleep and a resultRef", e.V, e.Data)
		}
		blob, err := r.env.Blobs.Get(ctx, wire.BlobName(r.id, *done.ResultRef))
		if err != nil || string(blob) != result {
			t.Fatalf("the result's blob: %d bytes, %v", len(blob), err)
		}
	}
}

// hanging makes a journaled call whose function ignores its context until
// released; any other delivery is echoed.
type hanging struct{ release chan struct{} }

func (hanging) EventKinds() []string { return nil }

func (a hanging) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	text := in.Inputs[0].Text
	if text == "hang" {
		_, err := in.Do(ctx, "stuck", func(context.Context, string) ([]byte, error) {
			<-a.release
			return []byte("late"), nil
		})
		return runtime.StepResult{}, err
	}
	return runtime.StepResult{Outcome: runtime.OutcomeDone, Events: []runtime.Event{runtime.Output(text)}}, nil
}

// A journaled call that hangs past the step timeout costs its step only:
// the step fails with step_timeout (the journal is not in its way) and the
// next delivery is answered.
func TestHungJournaledCallTimesOut(t *testing.T) {
	a := hanging{release: make(chan struct{})}
	defer close(a.release)
	r := newRig(t, func(e *session.Env) {
		e.Agent, e.StepTimeout, e.Journal = a, 300*time.Millisecond, memory.NewJournal()
	})
	r.start()
	r.send(deliver("hang"))
	r.eventually("the step_timeout error", func() bool {
		for _, e := range r.stream() {
			if e.Kind == wire.EventErrorKind && strings.Contains(string(e.Data), runtime.CodeStepTimeout) {
				return true
			}
		}
		return false
	})
	r.send(deliver("next"))
	r.eventually("the next delivery answered", func() bool { return slices.Contains(r.outputs(), "next") })
}
