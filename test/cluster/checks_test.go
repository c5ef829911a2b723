package cluster_test

import (
	"github.com/baton-rt/baton/internal/execlog"
	"testing"
	"time"

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
