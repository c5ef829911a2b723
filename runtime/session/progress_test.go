package session

import (
	"testing"

	"github.com/baton-rt/baton/runtime"
)

// A commit shows progress when no step is in flight, or when the step due
// at the last commit is no longer due; a boot or admission commit does not.
func TestProgressed(t *testing.T) {
	open := func(id string, steps int) runtime.Snapshot {
		return runtime.Snapshot{Turn: &runtime.Turn{ID: id, Steps: steps, Open: true}}
	}
	parked := runtime.Snapshot{Turn: &runtime.Turn{ID: "t1", Steps: 1}}
	paused := open("t1", 0)
	paused.Paused = true
	for _, tt := range []struct {
		name      string
		last, now runtime.Snapshot
		want      bool
	}{
		{"idle", runtime.Snapshot{}, runtime.Snapshot{}, true},
		{"parked on a wait", open("t1", 0), parked, true},
		{"paused", open("t1", 0), paused, true},
		{"admission from idle", runtime.Snapshot{}, open("t1", 0), false},
		{"boot commit, the same step due", open("t1", 0), open("t1", 0), false},
		{"a step folded, the turn goes on", open("t1", 0), open("t1", 1), true},
		{"a turn completed, the next admitted", open("t1", 1), open("t2", 0), true},
	} {
		s := &Session{due: dueStep(tt.last)}
		if got := s.progressed(tt.now); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}
