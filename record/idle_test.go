package record_test

import (
	"testing"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// The idle rule's reasons, in their order: each row holds every later
// condition too, so the first that holds wins.
func TestNotIdle(t *testing.T) {
	all := record.Activity{Paused: true, Input: true, Auth: true, Tasks: 1, Queued: true, TurnLive: true}
	for _, tt := range []struct {
		name string
		a    record.Activity
		want string
	}{
		{"ended", with2(all, func(a *record.Activity) { a.State = record.StateEnded }), "ended"},
		{"quarantined", with2(all, func(a *record.Activity) { a.State = record.StateQuarantined }), "quarantined"},
		{"mid-handoff", with2(all, func(a *record.Activity) { a.State = record.StateHandoff }), wire.SkipBusy},
		{"paused", all, wire.SkipPaused},
		{"paused record", record.Activity{State: record.StatePaused}, wire.SkipPaused},
		{"input", with2(all, func(a *record.Activity) { a.Paused = false }), wire.SkipInput},
		{"authorization", record.Activity{Auth: true, Tasks: 1, Queued: true, TurnLive: true}, wire.SkipAuthorization},
		{"task", record.Activity{Tasks: 2, Queued: true, TurnLive: true}, wire.SkipTask},
		{"queued", record.Activity{Queued: true, TurnLive: true}, wire.SkipQueued},
		{"live turn", record.Activity{TurnLive: true}, wire.SkipBusy},
		{"idle", record.Activity{State: record.StateActive}, ""},
		{"idle hibernated", record.Activity{State: record.StateHibernated}, ""},
	} {
		if got := record.NotIdle(tt.a); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	cp := wire.Checkpoint{Waits: wire.Waits{Tasks: []wire.TaskWait{{ID: "k"}}}, Turn: wire.TurnState{Live: true}}
	if got := record.NotIdle(record.CheckpointActivity(record.SessionRecord{State: record.StateActive}, cp, true)); got != wire.SkipTask {
		t.Errorf("checkpoint activity: %q", got)
	}
}

func with2(a record.Activity, f func(*record.Activity)) record.Activity {
	f(&a)
	return a
}
