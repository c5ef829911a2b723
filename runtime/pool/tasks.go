package pool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/runtime"
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

// startTask publishes a committed task (message ID = the task ID, so a
// repeated start after a crash is deduplicated).
func (o *Owner) startTask(ctx context.Context, sessionID string, spec runtime.TaskSpec) error {
	data, err := json.Marshal(task{SessionID: sessionID, ID: spec.ID, Kind: spec.Kind, Duration: spec.Duration, Input: spec.Input})
	if err != nil {
		return err
	}
	_, err = o.cfg.JS.Publish(ctx, o.cfg.Names.Tasks(o.cfg.Deployment), data, jetstream.WithMsgID("task/"+sessionID+"/"+spec.ID))
	if err != nil {
		return fmt.Errorf("driver: start task %s: %w", spec.ID, err)
	}
	return nil
}

// runTasks consumes this deployment's tasks until ctx ends; a consumer that
// cannot be created or stops is retried (it is durable and file-backed, so
// it survives a server restart).
func (o *Owner) runTasks(ctx context.Context) error {
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

func (o *Owner) consumeTasks(ctx context.Context) error {
	cons, err := o.cfg.JS.CreateOrUpdateConsumer(ctx, o.cfg.Names.TasksStream(), jetstream.ConsumerConfig{
		Durable: "tasks-" + o.cfg.Deployment, FilterSubject: o.cfg.Names.Tasks(o.cfg.Deployment),
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: o.cfg.TaskAckWait, MaxAckPending: 256,
	})
	if err != nil {
		return fmt.Errorf("driver: task consumer: %w", err)
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
		return errors.New("driver: task consumer closed")
	}
}

func (o *Owner) runTask(ctx context.Context, m jetstream.Msg) {
	var t task
	if err := json.Unmarshal(m.Data(), &t); err != nil {
		o.log.Error("undecodable task dropped", "err", err)
		_ = m.Term()
		return
	}
	o.log.Info("task running", "task", t.ID, "session", t.SessionID)
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
func (o *Owner) safeExecTask(ctx context.Context, m jetstream.Msg, t task) (result json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			o.log.Error("task body panicked; the task fails", "task", t.ID, "session", t.SessionID,
				"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			result, err = nil, fmt.Errorf("task panic: %v", p)
		}
	}()
	return o.execTask(ctx, m, t)
}

// execTask runs the task, telling the server it is in progress meanwhile.
// The only built-in kind is "sleep" (the demo agent's /task).
func (o *Owner) execTask(ctx context.Context, m jetstream.Msg, t task) (json.RawMessage, error) {
	deadline := time.NewTimer(t.Duration)
	defer deadline.Stop()
	beat := time.NewTicker(o.cfg.TaskAckWait / 3)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-beat.C:
			_ = m.InProgress()
		case <-deadline.C:
			return json.RawMessage(fmt.Sprintf(`{"kind":%q,"sleptMs":%d}`, t.Kind, t.Duration.Milliseconds())), nil
		}
	}
}

// reportTask publishes task.result to the session's stable inbox subject;
// its command ID is derived from the task ID, so a re-run reports once.
func (o *Owner) reportTask(ctx context.Context, t task, result json.RawMessage, taskErr error) error {
	body := &wire.TaskResult{TaskID: t.ID, Result: result}
	if taskErr != nil {
		body = &wire.TaskResult{TaskID: t.ID, Error: taskErr.Error()}
	}
	id := "task-" + t.SessionID + "-" + t.ID
	data, err := wire.Encode(wire.Current(), wire.Command{
		V: wire.CurrentVersion, Kind: wire.KindTaskResult, ID: id,
		AcceptedDeploymentID: o.cfg.Deployment, AcceptedAt: o.now().UTC(), TaskResult: body,
	})
	if err != nil {
		return errors.Join(errors.New("driver: encode task.result"), err)
	}
	if _, err = o.cfg.JS.Publish(ctx, o.cfg.Names.Inbox(subjects.StableToken(t.SessionID)), data, jetstream.WithMsgID(id)); err != nil {
		return err
	}
	o.sendWake(o.cfg.Deployment, protocol.WakeRequest{SessionID: t.SessionID, Source: protocol.WakeTask})
	return nil
}
