package runtime_test

import (
	"fmt"
	"strings"

	"github.com/baton-rt/baton/runtime"
)

// format renders effects one per line (a commit's events indented below it).
func (h *harness) format(effs []runtime.Effect, err error) string {
	var b strings.Builder
	for _, e := range effs {
		b.WriteString(formatEffect(e))
	}
	if err != nil {
		fmt.Fprintf(&b, "error: %v\n", err)
	}
	return b.String()
}

func formatEffect(e runtime.Effect) string {
	switch e := e.(type) {
	case runtime.Commit:
		return formatCommit(e)
	case runtime.Publish:
		return fmt.Sprintf("publish %d..%d\n", e.Events[0].Seq, e.Events[len(e.Events)-1].Seq)
	case runtime.RunStep:
		if r := e.Retry; r != nil {
			return fmt.Sprintf("run %s inputs=%s attempt=%d after=%s code=%s\n", e.Input.Key(), ids(e.Input.Inputs), r.Attempt, r.After, r.Code)
		}
		return fmt.Sprintf("run %s inputs=%s\n", e.Input.Key(), ids(e.Input.Inputs))
	case runtime.CancelStep:
		return fmt.Sprintf("cancel-step %s/%d (%s)\n", e.TurnID, e.Step, e.Reason)
	case runtime.Handoff:
		return fmt.Sprintf("handoff %s -> %s\n", e.Trigger.ID, e.Target)
	case runtime.ArmTimer:
		return fmt.Sprintf("arm-timer %s deadline=+%s\n", e.Timer.ID, e.Timer.Deadline.Sub(epoch))
	case runtime.StartTask:
		return fmt.Sprintf("start-task %s %s\n", e.Task.ID, e.Task.Duration)
	case runtime.ClaimAlias:
		return fmt.Sprintf("claim-alias %s\n", e.Token)
	case runtime.Purge:
		return fmt.Sprintf("purge below=%d\n", e.Below)
	case runtime.ResolveCommit:
		return fmt.Sprintf("resolve-commit %s#%d\n", e.Writer.RunID, e.Writer.Write)
	case runtime.Cleanup:
		return fmt.Sprintf("cleanup %s aliases=%v\n", e.Reason, e.Aliases)
	}
	return fmt.Sprintf("unknown effect %T\n", e)
}

func formatCommit(c runtime.Commit) string {
	var b strings.Builder
	var applied []string
	for _, r := range c.Applied {
		applied = append(applied, fmt.Sprintf("%d:%s", r.Seq, r.ID))
	}
	s := c.Snapshot
	fmt.Fprintf(&b, "commit %s#%d next=%d applied=[%s]\n", s.Writer.RunID, s.Writer.Write, s.Applied.Next, strings.Join(applied, " "))
	for _, e := range s.Outbox {
		fmt.Fprintf(&b, "  %d %s", e.Seq, e.Kind)
		if len(e.Data) > 0 {
			fmt.Fprintf(&b, " %s", e.Data)
		}
		b.WriteString("\n")
	}
	return b.String()
}
