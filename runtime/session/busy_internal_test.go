package session

import (
	"encoding/json"
	"testing"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// A live turn's Before and Calls reach the checkpoint only once the
// session used a busy mode: a session that never did keeps a mid-turn
// checkpoint at the version an older build reads (here 1); one that did
// is at state version 9 and reads them back.
func TestBusyTurnKeptOnlyWhenUsed(t *testing.T) {
	snap := runtime.Snapshot{Started: true, Turns: 1, State: json.RawMessage(`{"n":2}`),
		Turn: &runtime.Turn{ID: "t1", Open: true, Steps: 1,
			Before: &runtime.Before{State: json.RawMessage(`{"n":1}`), HistoryLen: 3},
			Calls:  []wire.CallRef{{Name: "work", Step: 1}}}}
	for _, used := range []bool{false, true} {
		snap.BusyModes = used
		b, err := wire.EncodeCheckpoint(toCheckpoint("s1", snap, nil, sealed{}))
		if err != nil {
			t.Fatal(err)
		}
		d, err := DecodeCheckpoint(b)
		if err != nil {
			t.Fatal(err)
		}
		v, _ := wire.ReadStateVersion(b)
		got := d.Snap.Turn
		switch {
		case !used && (v != 1 || got.Before != nil || got.Calls != nil):
			t.Errorf("busy modes never used: state version %d, before %+v, calls %v; want 1 and neither", v, got.Before, got.Calls)
		case used && (v != wire.BusyStateVersion || got.Before == nil || string(got.Before.State) != `{"n":1}` ||
			got.Before.HistoryLen != 3 || len(got.Calls) != 1 || !d.Snap.BusyModes):
			t.Errorf("busy modes used: state version %d, before %+v, calls %v, busyModes %v", v, got.Before, got.Calls, d.Snap.BusyModes)
		}
	}
}
