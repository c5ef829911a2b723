//go:build upgrade

package upgrade

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
)

// busyModes is the busy modes' mixed-build case (inbox version 5): a busy
// session blue owns gets an interrupt through green's ingress — 422
// unsupported_mode naming blue and the version it reads, nothing sent —
// while queue and steer work; once the session moved to green, an
// interrupt is accepted and aborts the running step. It returns the
// session, whose checkpoint (an interrupted step in its history) is at
// state version 9 then.
func (f *fleet) busyModes() string {
	f.t.Helper()
	ctx := f.t.Context()
	id := f.deliver(f.blue, "up.busy", "/sleep 4s").SessionID
	f.waitEvents(id, "blue's step running", func(evs []wire.Event) bool { return harness.Count(evs, "turn.started") == 1 })
	err := f.client.Call(ctx, http.MethodPost, f.green+"/v1/deliveries",
		map[string]string{"alias": "up.busy", "text": "stop that", "mode": "interrupt"}, http.StatusAccepted, nil)
	var se *harness.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusUnprocessableEntity || !strings.Contains(se.Body, `"code":"unsupported_mode"`) ||
		!strings.Contains(se.Body, "deployment blue") || !strings.Contains(se.Body, "inbox wire version 1") {
		f.t.Fatalf("an interrupt for blue's busy session through green: %v, want 422 unsupported_mode naming blue and version 1", err)
	}
	f.t.Logf("POST /v1/deliveries {mode: interrupt} for blue's busy session %s → 422 %s", id, strings.TrimSpace(se.Body))
	// queue and steer work: blue applies them (busy, it skips the handoff).
	for _, mode := range []string{"steer", "queue"} {
		var rc ingress.Receipt
		if err := f.client.Call(ctx, http.MethodPost, f.green+"/v1/deliveries",
			map[string]string{"alias": "up.busy", "text": mode + " through green", "mode": mode}, http.StatusAccepted, &rc); err != nil {
			f.t.Fatalf("a %s delivery for blue's busy session through green: %v", mode, err)
		}
	}
	f.output(id, "queue through green", "blue")
	evs := f.waitEvents(id, "settled", func(evs []wire.Event) bool { return last(evs) == "session.waiting" })
	if slices.Contains(harness.Outputs(evs), "stop that") {
		f.t.Fatalf("the refused interrupt reached session %s", id)
	}
	f.t.Logf("steer and queue deliveries through green answered by blue: %q", harness.Outputs(evs))

	// Moved to green by its next delivery; there an interrupt aborts the
	// running step.
	f.deliver(f.green, "up.busy", "/sleep 20s")
	f.waitEvents(id, "green's step running", func(evs []wire.Event) bool {
		ev, ok := harness.Find(evs, harness.IsKind("handoff.completed"))
		return ok && ev.DeploymentID == "green" && harness.Count(evs, "turn.started") >= 3
	})
	f.onDeployment(id, "green")
	var rc ingress.Receipt
	if err := f.client.Call(ctx, http.MethodPost, f.green+"/v1/deliveries",
		map[string]string{"alias": "up.busy", "text": "interrupted on green", "mode": "interrupt"}, http.StatusAccepted, &rc); err != nil {
		f.t.Fatalf("an interrupt for green's session: %v", err)
	}
	evs = f.output(id, "interrupted on green", "green")
	if harness.Count(evs, "step.interrupted") != 1 {
		f.t.Fatalf("the interrupt on green aborted no step:\n%s", harness.Trace(evs))
	}
	f.waitEvents(id, "settled", func(evs []wire.Event) bool { return last(evs) == "session.waiting" })
	if v := f.stateV(id); v != wire.BusyStateVersion {
		f.t.Fatalf("after an interrupt the checkpoint is at state version %d, want %d", v, wire.BusyStateVersion)
	}
	f.t.Logf("on green, seq %d {mode: interrupt} aborted the running step; checkpoint at state version %d", rc.Seq, wire.BusyStateVersion)
	return id
}

// busyRollbackRefused checks, with blue promoted again, that the session
// that used a busy mode (its checkpoint at state version 9) is refused by
// blue's candidate before activation: green keeps it and applies the
// delivery.
func (f *fleet) busyRollbackRefused(id string) {
	f.t.Helper()
	f.deliver(f.green, "up.busy", "busy stays")
	evs := f.output(id, "busy stays", "green")
	failed, ok := harness.Find(evs, harness.IsKind("handoff.failed"))
	if !ok || !strings.Contains(string(failed.Data), "unsupported checkpoint state version (checkpoint stateV=9)") {
		f.t.Fatalf("no handoff.failed naming state version 9:\n%s", harness.Trace(evs))
	}
	f.onDeployment(id, "green")
	f.t.Logf("refused rollback of a session that used a busy mode: %s stays on green; handoff.failed %s", id, failed.Data)
	if !slices.Contains(harness.Outputs(evs), "busy stays") {
		f.t.Fatal("the delivery was not applied")
	}
}
