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
// checkpoint keeps a task's ID and duration only (wire.TaskWait), which is
// all the built-in "sleep" kind needs.
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
			if !s.env.Host.LeaseValid() {
				return ErrFenced
			}
			if err := s.env.Host.StartTask(ctx, s.id, runtime.TaskSpec{ID: t.ID, Duration: t.Duration}); err != nil {
				return err
			}
		}
	}
	return nil
}
