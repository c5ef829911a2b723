package runtime

import (
	"context"
	"encoding/json"
	"time"
)

// Background tasks. A step that returns OutcomeTask starts a TaskSpec: once
// the step commits, the task is a durable message that any owner process
// of the deployment runs with the handler registered for its kind
// (owner.WithTask, pool.Config.Tasks), at least once; its result returns
// to the session as a task.result command, applied once (task.completed).
// The built-in kind "sleep" (the pool's) waits TaskSpec.Duration.

// TaskRun is one execution of a background task, as its handler gets it.
type TaskRun struct {
	SessionID string
	// ID is the task's ID, the same on every execution: pass it to an
	// external API as the idempotency key.
	ID    string
	Kind  string
	Input json.RawMessage
	// Duration is a sleep task's.
	Duration time.Duration
	// Progress tells the task stream the task is alive (it is not handed
	// to another process while the calls keep coming) and, when note is
	// not empty, publishes it as a live task.progress event of the session.
	// The runner also does the former by itself while the handler runs.
	Progress func(note string)
}

// TaskHandler runs the tasks of one kind. Its result — JSON of at most
// wire.MaxTaskResultBytes — or its error returns to the session; it may run
// more than once for one task (its process died, or froze past the ack
// wait), so make its effect idempotent by TaskRun.ID. It must honour ctx
// (cancelled when the process shuts down: another process runs the task
// again).
type TaskHandler func(ctx context.Context, t TaskRun) (json.RawMessage, error)
