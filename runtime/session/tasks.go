package session

import (
	"context"
	"encoding/json"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// restartTasks publishes again each live task that the last commit before
// this boot started: the previous owner may have crashed between that
// commit and its StartTask. The message ID makes it a no-op within the
// task stream's duplicate window when the task was published. The
// checkpoint keeps the task's kind and input (wire.TaskWait; an older
// checkpoint's task without a kind is a sleep), so it is published again
// exactly as it was started.
func (s *Session) restartTasks(ctx context.Context, bootOutbox []wire.Event) error {
	if s.stopped || len(bootOutbox) == 0 {
		return nil
	}
	live := s.m.Snapshot().Waits.Tasks
	for _, e := range bootOutbox {
		if e.Kind != wire.EventTaskStarted {
			continue
		}
		var d wire.TaskStarted
		if err := json.Unmarshal(e.Data, &d); err != nil {
			continue
		}
		for _, t := range live {
			if t.ID != d.TaskID {
				continue
			}
			if err := s.env.Process.AwaitLease(ctx); err != nil {
				return err
			}
			spec := runtime.TaskSpec{ID: t.ID, Kind: t.Kind, Duration: t.Duration, Input: t.Input}
			if err := s.env.Tasks.StartTask(ctx, s.id, spec); err != nil {
				return err
			}
		}
	}
	return nil
}
