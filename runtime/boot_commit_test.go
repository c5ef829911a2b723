package runtime_test

import (
	"testing"

	"github.com/baton-rt/baton/runtime"
)

// A boot with Commit commits even when nothing changed — the run's first
// commit, which clears its claim's mark in the record — stamped with the
// new run as the next write; without it an idle boot commits nothing.
func TestBootCommit(t *testing.T) {
	cfg := runtime.Config{SessionID: "s1", RunID: "run-2", Deployment: "v1"}
	idle := runtime.Snapshot{Started: true, Writer: runtime.Writer{RunID: "run-1", Write: 7}}
	for _, commit := range []bool{false, true} {
		m, err := runtime.NewMachine(cfg, idle)
		if err != nil {
			t.Fatal(err)
		}
		effs, err := m.Handle(runtime.Boot{Now: epoch, Reason: runtime.BootRecover, Commit: commit})
		if err != nil {
			t.Fatal(err)
		}
		var commits []runtime.Commit
		for _, e := range effs {
			if c, ok := e.(runtime.Commit); ok {
				commits = append(commits, c)
			}
		}
		switch {
		case !commit && len(commits) != 0:
			t.Fatalf("an idle boot without Commit committed: %v", effs)
		case commit && (len(commits) != 1 || commits[0].Snapshot.Writer != runtime.Writer{RunID: "run-2", Write: 8} ||
			len(commits[0].Snapshot.Outbox) != 0):
			t.Fatalf("an idle boot with Commit: %v", effs)
		}
	}
}
