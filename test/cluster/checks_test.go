package cluster_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/execlog"
	"github.com/baton-rt/baton/internal/harness"
)

// TestProblems: the one-owner-at-a-time check of TestLeaseAcrossElection
// flags a session whose steps move to another process with no fence of
// the first in between, and accepts one with that fence.
func TestProblems(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	obs := []harness.ExecObs{
		{Exec: execlog.Exec{SessionID: "s", StepKey: "k1", Process: "o1"}, NotBefore: at(0), By: at(20)},
		{Exec: execlog.Exec{SessionID: "s", StepKey: "k2", Process: "o2"}, NotBefore: at(500), By: at(520)},
		{Exec: execlog.Exec{SessionID: "t", StepKey: "k1", Process: "o1"}, NotBefore: at(0), By: at(20)},
		{Exec: execlog.Exec{SessionID: "t", StepKey: "k2", Process: "o1"}, NotBefore: at(500), By: at(520)},
	}
	if p := problems(obs, nil); len(p) != 1 {
		t.Fatalf("a move without a fence: %d problems %v, want 1", len(p), p)
	}
	if p := problems(obs, map[string][]time.Time{"o2": {at(100)}}); len(p) != 1 {
		t.Fatalf("a move with only the new owner's fence: %d problems %v, want 1", len(p), p)
	}
	if p := problems(obs, map[string][]time.Time{"o1": {at(600)}}); len(p) != 1 {
		t.Fatalf("a move with the old owner's fence after it: %d problems %v, want 1", len(p), p)
	}
	if p := problems(obs, map[string][]time.Time{"o1": {at(100)}}); len(p) != 0 {
		t.Fatalf("a move across the old owner's fence: problems %v, want none", p)
	}
}

// TestStopTimes: an owner stops starting steps at each fence, and at a
// pause that ended in a fence (its renewal then met a peer's takeover),
// not at a pause that ended in a renewal. The logs are the shapes of a
// CI run in which the election outlasted the lease TTL: the peer took the
// paused owner's lease over, and ran its sessions, before the paused
// owner's renewal met the takeover and logged its fence.
func TestStopTimes(t *testing.T) {
	line := func(sec float64, msg string) string {
		ts := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(sec * float64(time.Second)))
		return fmt.Sprintf(`{"time":%q,"level":"WARN","msg":%q,"process":"o2"}`, ts.Format(time.RFC3339Nano), msg)
	}
	at := func(sec float64) time.Time {
		return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(sec * float64(time.Second)))
	}
	log := strings.Join([]string{
		line(1, "lease acquired"),
		line(2.4, pausedMsg), // renewed: no stop
		line(2.6, renewedMsg),
		line(4.4, pausedMsg), // ended in the fence: a stop from here
		"not json",
		line(9.3, fencedMsg),
		line(9.4, "lease acquired"),
		line(12, fencedMsg), // a fence without a pause
	}, "\n")
	got := stopTimes(log)
	want := []time.Time{at(4.4), at(9.3), at(12)}
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Fatalf("stop times %v, want %v", got, want)
	}
	// the failed run: o2's last step before its pause, o1's step after
	// o2's lease expired, o2's fence logged after o1's step
	obs := []harness.ExecObs{
		{Exec: execlog.Exec{SessionID: "s", StepKey: "t1/1", Process: "o2"}, NotBefore: at(0.9), By: at(0.95)},
		{Exec: execlog.Exec{SessionID: "s", StepKey: "t2/1", Process: "o1"}, NotBefore: at(6.1), By: at(6.2)},
	}
	if p := problems(obs, map[string][]time.Time{"o2": {at(6.3)}}); len(p) != 1 {
		t.Fatalf("a move before the fence, no pause: %d problems %v, want 1", len(p), p)
	}
	if p := problems(obs, map[string][]time.Time{"o2": stopTimes(strings.Join([]string{line(2.4, pausedMsg), line(6.3, fencedMsg)}, "\n"))}); len(p) != 0 {
		t.Fatalf("a move across a pause that ended in a fence: problems %v, want none", p)
	}
	if p := problems(obs, map[string][]time.Time{"o2": stopTimes(strings.Join([]string{line(2.4, pausedMsg), line(2.6, renewedMsg), line(6.3, fencedMsg)}, "\n"))}); len(p) != 1 {
		t.Fatalf("a move across a pause that ended in a renewal: %d problems %v, want 1", len(p), p)
	}
}
