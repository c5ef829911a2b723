package durability_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/wire"
)

// A panic in one session's step, and a step that hangs past --step-timeout,
// cost exactly that step: the owner process (a real one) keeps running with
// the same PID, its 19 other sessions answer their next delivery, and the
// failing session records error {code} and answers its next delivery too.
func TestPanicAndHangContained(t *testing.T) {
	c := newCluster(t)
	p := c.owner("p1", "--step-timeout", "2s")
	pid := p.Cmd.Process.Pid
	ids := make([]string, 20)
	for i := range ids {
		ids[i] = c.start(protocol.StartRequest{})
		c.send(ids[i], harness.Deliver(fmt.Sprintf("hello %d", i)))
	}
	for i, id := range ids {
		c.waitOutput(id, fmt.Sprintf("hello %d", i))
	}

	c.send(ids[0], harness.Deliver("/panic"))
	c.send(ids[1], harness.Deliver("/hang"))
	for i, id := range ids[2:] {
		c.send(id, harness.Deliver(fmt.Sprintf("again %d", i+2)))
	}
	for i, id := range ids[2:] {
		c.waitOutput(id, fmt.Sprintf("again %d", i+2))
	}
	for id, code := range map[string]string{ids[0]: wire.CodeAgentPanic, ids[1]: wire.CodeStepTimeout} {
		evs := c.waitKind(id, wire.EventErrorKind, 1)
		if d := errorData(t, evs); d.Code != code || d.TurnID != "t2" {
			t.Fatalf("session %s: error %+v, want code %s in turn t2", id, d, code)
		}
		c.send(id, harness.Deliver("still here"))
		c.waitOutput(id, "still here")
	}
	if p.Cmd.ProcessState != nil || p.Cmd.Process.Pid != pid || harness.LogCount(p, "owner serving") != 1 {
		t.Fatalf("the owner process did not survive: state %v, serving logged %d times", p.Cmd.ProcessState, harness.LogCount(p, "owner serving"))
	}
	if !p.Contains("agent panicked in a step") || !p.Contains("goroutine") {
		t.Fatal("the panic was not logged with its stack")
	}
	for _, id := range ids {
		evs := c.events(id)
		checkStream(t, evs)
		if rec := c.record(id); rec.Epoch != 1 {
			t.Fatalf("session %s rebooted: epoch %d", id, rec.Epoch)
		}
		c.checkCommittedStepsRanOnce(id, evs)
		for key, procs := range c.runs(id) {
			if len(procs) > 1 {
				t.Fatalf("session %s: step %s ran %d times: a result caused a re-run", id, key, len(procs))
			}
		}
	}
}

func errorData(t *testing.T, evs []wire.Event) wire.ErrorData {
	t.Helper()
	i := slices.IndexFunc(evs, func(e wire.Event) bool { return e.Kind == wire.EventErrorKind })
	var d wire.ErrorData
	if err := json.Unmarshal(evs[i].Data, &d); err != nil {
		t.Fatal(err)
	}
	return d
}
