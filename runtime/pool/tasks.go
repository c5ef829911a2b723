package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// task is a durable background task: a message on the deployment's task
// subject, run by any owner process of that deployment; its result returns
// through the session's inbox as task.result. It runs at least once.
type task struct {
	SessionID string          `json:"sessionId"`
	ID        string          `json:"taskId"`
	Kind      string          `json:"kind,omitempty"`
	Duration  time.Duration   `json:"durationNs,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
}

// tasks runs the deployment's durable background tasks (Config.Tasks):
// it publishes a committed task, consumes the deployment's task subject
// and returns each result through the session's inbox. It uses nothing of
// the sessions this process runs.
type tasks struct {
	cfg  *Config
	log  *slog.Logger
	live session.Live // progress notes; nil: none
	wake func(deployment string, req protocol.WakeRequest)
}

// StartTask publishes a committed task (message ID = the task ID, so a
// repeated start after a crash is deduplicated).
func (o *tasks) StartTask(ctx context.Context, sessionID string, spec runtime.TaskSpec) error {
	data, err := json.Marshal(task{SessionID: sessionID, ID: spec.ID, Kind: spec.Kind, Duration: spec.Duration, Input: spec.Input})
	if err != nil {
		return err
	}
	_, err = o.cfg.JS.Publish(ctx, o.cfg.Names.Tasks(o.cfg.Deployment), data, jetstream.WithMsgID("task/"+sessionID+"/"+spec.ID))
	if err != nil {
		return fmt.Errorf("pool: start task %s: %w", spec.ID, err)
	}
	return nil
}

// runTasks consumes this deployment's tasks until ctx ends; a consumer that
// cannot be created or stops is retried (it is durable and file-backed, so
// it survives a server restart).
func (o *tasks) runTasks(ctx context.Context) error {
	for ctx.Err() == nil {
		err := o.consumeTasks(ctx)
		if ctx.Err() != nil {
			break
		}
		o.log.Warn("task consumer stopped; retrying", "err", err)
		sleep(ctx, time.Second)
	}
	return nil
}

func (o *tasks) consumeTasks(ctx context.Context) error {
	cons, err := o.cfg.JS.CreateOrUpdateConsumer(ctx, o.cfg.Names.TasksStream(), jetstream.ConsumerConfig{
		Durable: "tasks-" + o.cfg.Deployment, FilterSubject: o.cfg.Names.Tasks(o.cfg.Deployment),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: o.cfg.TaskAckWait, MaxAckPending: 256,
	})
	if err != nil {
		return fmt.Errorf("pool: task consumer: %w", err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) { go o.runTask(ctx, m) })
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		cc.Drain()
		return nil
	case <-cc.Closed():
		return errors.New("pool: task consumer closed")
	}
}

func (o *tasks) runTask(ctx context.Context, m jetstream.Msg) {
	var t task
	if err := json.Unmarshal(m.Data(), &t); err != nil {
		o.log.Error("undecodable task dropped", "err", err)
		_ = m.Term()
		return
	}
	o.log.Info("task running", "task", t.ID, "kind", wire.TaskKind(t.Kind), "session", t.SessionID)
	result, taskErr := o.safeExecTask(ctx, m, t)
	if ctx.Err() != nil {
		return // shutting down: another process re-runs it after AckWait
	}
	if err := o.reportTask(ctx, t, result, taskErr); err != nil {
		o.log.Warn("task result not delivered; will retry", "task", t.ID, "err", err)
		_ = m.Nak()
		return
	}
	_ = m.Ack()
}

// safeExecTask is execTask with a panic in the task body recovered: the task
// fails (its result carries the error), the process and its other tasks and
// sessions go on.
func (o *tasks) safeExecTask(ctx context.Context, m jetstream.Msg, t task) (result json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			o.log.Error("task body panicked; the task fails", "task", t.ID, "session", t.SessionID,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			result, err = nil, fmt.Errorf("%s: %v", wire.CodeTaskPanic, p)
		}
	}()
	return o.execTask(ctx, m, t)
}

// execTask runs the task with its kind's handler, telling the server it is
// in progress meanwhile (every third of the ack wait, and at each Progress
// call). A kind without a handler, a result that is not JSON or is too
// large fail the task with their code (wire.TaskErrorCode).
func (o *tasks) execTask(ctx context.Context, m jetstream.Msg, t task) (json.RawMessage, error) {
	kind := wire.TaskKind(t.Kind)
	h := o.cfg.Tasks[kind]
	if h == nil {
		return nil, fmt.Errorf("%s: no handler for task kind %q on deployment %s (it runs: %s)",
			wire.CodeTaskUnknownKind, kind, o.cfg.Deployment, strings.Join(slices.Sorted(maps.Keys(o.cfg.Tasks)), ", "))
	}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	beat := time.NewTicker(o.cfg.TaskAckWait / 3)
	defer beat.Stop()
	go func() {
		for {
			select {
			case <-hctx.Done():
				return
			case <-beat.C:
				_ = m.InProgress()
			}
		}
	}()
	run := runtime.TaskRun{SessionID: t.SessionID, ID: t.ID, Kind: kind, Input: t.Input, Duration: t.Duration,
		Progress: func(note string) { o.taskProgress(m, t, note) }}
	result, err := h(hctx, run)
	if err != nil {
		return nil, err
	}
	return checkTaskResult(result)
}

// SleepTask is the handler of the built-in kind "sleep": it waits the
// task's Duration and reports {"kind":"sleep","sleptMs"}.
func SleepTask(ctx context.Context, t runtime.TaskRun) (json.RawMessage, error) {
	timer := time.NewTimer(t.Duration)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-timer.C:
	}
	return json.Marshal(map[string]any{"kind": wire.TaskSleep, "sleptMs": t.Duration.Milliseconds()})
}

// checkTaskResult bounds a handler's result: JSON (empty is null), at most
// wire.MaxTaskResultBytes.
func checkTaskResult(result json.RawMessage) (json.RawMessage, error) {
	if len(result) == 0 {
		return json.RawMessage("null"), nil
	}
	if len(result) > wire.MaxTaskResultBytes {
		return nil, fmt.Errorf("%s: the result is %d bytes, at most %d travel back to the session (store a large result yourself and return its address)",
			wire.CodeTaskResultTooLarge, len(result), wire.MaxTaskResultBytes)
	}
	if !json.Valid(result) {
		return nil, fmt.Errorf("%s: the result is not JSON", wire.CodeTaskInvalidResult)
	}
	return result, nil
}

// taskProgress keeps the task alive and publishes its note live.
func (o *tasks) taskProgress(m jetstream.Msg, t task, note string) {
	_ = m.InProgress()
	if note == "" {
		return
	}
	if len(note) > wire.MaxProgressNoteBytes {
		note = note[:wire.MaxProgressNoteBytes-3] // room for a replaced cut rune
	}
	msg, err := wire.EncodeLive(t.SessionID, o.cfg.Deployment, o.cfg.Now(), wire.TaskProgress{TaskID: t.ID, Note: strings.ToValidUTF8(note, "\uFFFD")})
	if err == nil {
		o.live.Publish(t.SessionID, msg)
	}
}

// reportTask publishes task.result to the session's stable inbox subject;
// its command ID is derived from the task ID, so a re-run reports once.
func (o *tasks) reportTask(ctx context.Context, t task, result json.RawMessage, taskErr error) error {
	body := &wire.TaskResult{TaskID: t.ID, Result: result}
	if taskErr != nil {
		body = &wire.TaskResult{TaskID: t.ID, Error: taskErr.Error()}
	}
	id := "task-" + t.SessionID + "-" + t.ID
	data, err := wire.Encode(wire.Current(), wire.Command{
		V: wire.CurrentVersion, Kind: wire.KindTaskResult, ID: id,
		AcceptedDeploymentID: o.cfg.Deployment, AcceptedAt: o.cfg.Now().UTC(), TaskResult: body,
	})
	if err != nil {
		return errors.Join(errors.New("pool: encode task.result"), err)
	}
	if _, err = o.cfg.JS.Publish(ctx, o.cfg.Names.Inbox(subjects.StableToken(t.SessionID)), data, jetstream.WithMsgID(id)); err != nil {
		return err
	}
	o.wake(o.cfg.Deployment, protocol.WakeRequest{SessionID: t.SessionID, Source: protocol.WakeTask})
	return nil
}
