package runtime_test

import (
	"slices"
	"testing"

	"github.com/baton-rt/baton/runtime"
)

// TestStepHistoryIsTheAgentsOwn: the step's history is a copy; an agent
// that overwrites an entry of its input, or truncates it and appends,
// leaves the session's history (and the next commit) as it was.
func TestStepHistoryIsTheAgentsOwn(t *testing.T) {
	d := newCDriver(t, "s1", "d1")
	d.deliver("one")
	d.step(runtime.StepResult{Outcome: runtime.OutcomeDone, History: []runtime.Entry{runtime.AssistantText("first")}})
	d.deliver("two")
	in := d.run.Input
	if len(in.History) != 3 {
		t.Fatalf("step history %d entries, want 3", len(in.History))
	}
	in.History[0] = runtime.AssistantText("overwritten")
	_ = append(in.History[:1], runtime.AssistantText("scribbled"))
	d.step(runtime.StepResult{Outcome: runtime.OutcomeDone})
	var got []string
	for _, e := range d.committed.History {
		got = append(got, e.Text())
	}
	if want := []string{"one", "first", "two"}; !slices.Equal(got, want) {
		t.Fatalf("committed history %q, want %q", got, want)
	}
}
