package ingress

import (
	"testing"

	"github.com/baton-rt/baton/record"
)

// settles: only a record a run has written, stamped with its owners' wire
// version, resolves a session ID without the stable hook.
func TestSettles(t *testing.T) {
	for _, tt := range []struct {
		name string
		rec  record.SessionRecord
		want bool
	}{
		{"new, no run's commit yet", record.SessionRecord{Epoch: 1, WireV: 2}, false},
		{"new, its run committed", record.SessionRecord{Epoch: 1, WriteCounter: 1, WireV: 2}, true},
		{"claimed", record.SessionRecord{Epoch: 2, WireV: 2}, true},
		{"no wire-version stamp (an older build's record)", record.SessionRecord{Epoch: 3, WriteCounter: 4}, false},
	} {
		if got := settles(tt.rec); got != tt.want {
			t.Errorf("%s: settles = %v, want %v", tt.name, got, tt.want)
		}
	}
}
