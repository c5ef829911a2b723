package ingress_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// checkpointOf decodes session id's committed checkpoint (a leader read).
func (e *env) checkpointOf(id string) wire.Checkpoint {
	e.t.Helper()
	cp, err := wire.DecodeCheckpoint(e.leader(id).Record.Checkpoint)
	if err != nil {
		e.t.Fatal(err)
	}
	return cp
}

// outcomeOf is the one terminal outcome of command id, failing the test
// on none or several.
func outcomeOf(t *testing.T, evs []wire.Event, id string) string {
	t.Helper()
	got := harness.TerminalOutcomes(evs)[id]
	if len(got) != 1 {
		t.Fatalf("command %s has terminal outcomes %v, want exactly one: %v", id, got, kindsOf(evs))
	}
	return got[0]
}

// TestBusyInterrupt: an interrupt from the running turn's caller aborts a
// /sleep 20s step at once; the new input runs in the same turn within a
// few seconds, and the history records the interrupted step. Another
// caller's interrupt waits for its own turn.
func TestBusyInterrupt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"busy.interrupt","text":"/sleep 20s","caller":"ann"}`).SessionID
	e.waitEvents(id, "the step running", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventTurnStarted) == 1 })
	sent := time.Now()
	rc := e.deliver(fmt.Sprintf(`{"sessionId":%q,"text":"do this instead","mode":"interrupt","caller":"ann"}`, id))
	evs := e.waitEvents(id, "the interrupt's output", func(evs []wire.Event) bool {
		return slices.Contains(harness.Outputs(evs), "do this instead") && harness.Count(evs, wire.EventTurnCompleted) == 1
	})
	if took := time.Since(sent); took > 10*time.Second {
		t.Fatalf("the interrupt's input ran %v after it was sent, want within a few seconds", took)
	}
	if n := harness.Count(evs, wire.EventTurnStarted); n != 1 {
		t.Fatalf("%d turns, want the interrupt in the same turn: %v", n, kindsOf(evs))
	}
	if harness.Count(evs, wire.EventStepInterrupted) != 1 || harness.Count(evs, wire.EventTurnCancelled) != 0 {
		t.Fatalf("want one step.interrupted and no turn.cancelled: %v", kindsOf(evs))
	}
	if got := outcomeOf(t, evs, rc.CommandID); got != wire.EventCommandApplied {
		t.Fatalf("the interrupt ended with %s", got)
	}
	cp := e.checkpointOf(id)
	if !slices.ContainsFunc(cp.History, func(h wire.HistoryEntry) bool { return h.Kind == wire.EntryStepInterrupted }) {
		t.Fatalf("the history records no interrupted step: %+v", cp.History)
	}
	if cp.StateV != wire.BusyStateVersion {
		t.Fatalf("a checkpoint with an interrupted step is at state version %d, want %d", cp.StateV, wire.BusyStateVersion)
	}

	// Another caller's interrupt waits for its own turn: no step.interrupted.
	e.deliver(fmt.Sprintf(`{"sessionId":%q,"text":"/sleep 2s","caller":"ann"}`, id))
	e.waitEvents(id, "the second turn running", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventTurnStarted) == 2 })
	bob := e.deliver(fmt.Sprintf(`{"sessionId":%q,"text":"bob's turn","mode":"interrupt","caller":"bob"}`, id))
	evs = e.waitEvents(id, "bob's output", func(evs []wire.Event) bool { return slices.Contains(harness.Outputs(evs), "bob's turn") })
	if n := harness.Count(evs, wire.EventStepInterrupted); n != 1 {
		t.Fatalf("another caller's interrupt interrupted a step (%d step.interrupted): %v", n, kindsOf(evs))
	}
	if got := outcomeOf(t, evs, bob.CommandID); got != wire.EventCommandApplied {
		t.Fatalf("bob's interrupt ended with %s", got)
	}
	if n := harness.Count(evs, wire.EventTurnStarted); n != 3 {
		t.Fatalf("%d turns, want bob's interrupt to start a turn of its own after ann's: %v", n, kindsOf(evs))
	}
}

// TestBusyRollback: a rollback restores the state and history from
// before the running turn and keeps its usage (checked in the record);
// the stream shows turn.rolled_back with the journaled calls the turn
// made, and the new input starts a fresh turn.
func TestBusyRollback(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"busy.rollback","text":"/work 1","caller":"ann"}`).SessionID
	e.waitEvents(id, "the first turn", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventTurnCompleted) == 1 })
	before := e.checkpointOf(id)
	e.deliver(fmt.Sprintf(`{"sessionId":%q,"text":"/work 5 3s","caller":"ann"}`, id))
	e.waitEvents(id, "the turn's first step", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventTurnStep) == 2 })
	spent := e.checkpointOf(id).Usage
	rc := e.deliver(fmt.Sprintf(`{"sessionId":%q,"text":"start over","mode":"rollback","caller":"ann"}`, id))
	evs := e.waitEvents(id, "the fresh turn", func(evs []wire.Event) bool { return slices.Contains(harness.Outputs(evs), "start over") })
	if got := outcomeOf(t, evs, rc.CommandID); got != wire.EventCommandApplied {
		t.Fatalf("the rollback ended with %s", got)
	}
	rb := harness.AllData[wire.TurnRolledBack](t, evs, wire.EventTurnRolledBack)
	if len(rb) != 1 || rb[0].TurnID != "t2" {
		t.Fatalf("turn.rolled_back %+v, want one for t2: %v", rb, kindsOf(evs))
	}
	if len(rb[0].Calls) < 1 || rb[0].Calls[0] != (wire.CallRef{Name: "work", Step: 1, Position: 0}) {
		t.Fatalf("turn.rolled_back calls %+v, want the committed step's work call first", rb[0].Calls)
	}
	if harness.Count(evs, wire.EventTurnCancelled) != 1 || harness.Count(evs, wire.EventTurnStarted) != 3 {
		t.Fatalf("want t2 cancelled and a fresh t3: %v", kindsOf(evs))
	}
	e.waitEvents(id, "t3 settled", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventTurnCompleted) == 2 })
	after := e.checkpointOf(id)
	if string(after.State) != string(before.State) {
		t.Fatalf("state after the rollback %s, want the state before the turn %s", after.State, before.State)
	}
	// The history is the one before the turn plus the new turn's input and
	// its step's entries: the rolled-back turn's entries are gone.
	for _, h := range after.History {
		if slices.ContainsFunc(h.Content, func(p wire.Part) bool { return p.Text == "/work 5 3s" }) || h.Text == "/work 5 3s" {
			t.Fatalf("the rolled-back turn's input is still in the history: %+v", after.History)
		}
	}
	if after.Usage.InputTokens < spent.InputTokens || spent.InputTokens < before.Usage.InputTokens+100 {
		t.Fatalf("usage before the turn %+v, spent in it %+v, after the rollback %+v: the spent usage must stay", before.Usage, spent, after.Usage)
	}
}

// TestBusyDebounce: three debounced deliveries 300 ms apart in a 3 s
// window start one turn with all three inputs; the open window shows in
// the status's waitingFor.
func TestBusyDebounce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"busy.debounce"}`).SessionID
	var ids []string
	for i, text := range []string{"one", "two", "three"} {
		if i > 0 {
			time.Sleep(300 * time.Millisecond)
		}
		rc := e.deliver(fmt.Sprintf(`{"sessionId":%q,"text":%q,"mode":"debounce","debounce":"3s"}`, id, text))
		ids = append(ids, rc.CommandID)
	}
	st := e.status(id)
	if !slices.ContainsFunc(st.WaitingFor, func(w record.Wait) bool { return w.Kind == "debounce" && w.Until != nil }) {
		t.Fatalf("waitingFor %+v, want the open debounce window", st.WaitingFor)
	}
	e.waitEvents(id, "the window's turn", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventTurnCompleted) == 1 })
	time.Sleep(300 * time.Millisecond) // a second turn would be on the stream by now
	evs := e.events(id, 0)
	if n := harness.Count(evs, wire.EventTurnStarted); n != 1 {
		t.Fatalf("%d turns, want one for the three debounced deliveries: %v", n, kindsOf(evs))
	}
	if got := harness.Outputs(evs); !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Fatalf("outputs %q, want the three inputs of one step", got)
	}
	steps := harness.AllData[wire.TurnStep](t, evs, wire.EventTurnStep)
	if len(steps) != 1 {
		t.Fatalf("%d steps, want the three inputs in one step", len(steps))
	}
	for _, c := range ids {
		if got := outcomeOf(t, evs, c); got != wire.EventCommandApplied {
			t.Fatalf("debounced %s ended with %s", c, got)
		}
	}
}

// TestBusyLatestAndReject: latest supersedes two queued deliveries of its
// caller; a reject during a step is refused (busy); a bad mode is 400.
func TestBusyLatestAndReject(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"busy.latest","text":"/sleep 3s","caller":"ann"}`).SessionID
	e.waitEvents(id, "the step running", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventTurnStarted) == 1 })
	var latest []string
	var seqs []uint64
	for _, text := range []string{"v1", "v2", "v3"} {
		rc := e.deliver(fmt.Sprintf(`{"sessionId":%q,"text":%q,"mode":"latest","caller":"ann"}`, id, text))
		latest, seqs = append(latest, rc.CommandID), append(seqs, rc.Seq)
	}
	rej := e.deliver(fmt.Sprintf(`{"sessionId":%q,"text":"busy?","mode":"reject","caller":"bob"}`, id))
	evs := e.waitEvents(id, "v3's output", func(evs []wire.Event) bool { return slices.Contains(harness.Outputs(evs), "v3") })
	for i, want := range []string{wire.EventCommandSuperseded, wire.EventCommandSuperseded, wire.EventCommandApplied} {
		if got := outcomeOf(t, evs, latest[i]); got != want {
			t.Fatalf("latest v%d ended with %s, want %s", i+1, got, want)
		}
	}
	if got := outcomeOf(t, evs, rej.CommandID); got != wire.EventCommandRejected {
		t.Fatalf("a reject during a step ended with %s", got)
	}
	r := harness.AllData[wire.CommandRejected](t, evs, wire.EventCommandRejected)
	if len(r) != 1 || r[0].Reason != wire.RejectBusy {
		t.Fatalf("command.rejected %+v, want reason busy", r)
	}
	s := harness.AllData[wire.CommandSuperseded](t, evs, wire.EventCommandSuperseded)
	if len(s) != 2 || s[0].By != s[1].Seq || s[1].By == 0 {
		t.Fatalf("command.superseded %+v: v1 by v2, v2 by v3", s)
	}
	// The outcome lookup tells each status.
	for i, want := range map[uint64]string{seqs[0]: "superseded", seqs[2]: "applied", rej.Seq: "rejected"} {
		var o ingress.CommandOutcome
		code, b := e.call(http.MethodGet, fmt.Sprintf("/v1/sessions/%s/commands/%d", id, i), "", testToken)
		if code != http.StatusOK || json.Unmarshal(b, &o) != nil || o.Status != want {
			t.Fatalf("GET commands/%d = %d %s, want status %s", i, code, b, want)
		}
	}
	if slices.Contains(harness.Outputs(evs), "v1") || slices.Contains(harness.Outputs(evs), "v2") || slices.Contains(harness.Outputs(evs), "busy?") {
		t.Fatalf("a superseded or rejected delivery ran: %q", harness.Outputs(evs))
	}
	for _, body := range []string{
		`{"sessionId":%q,"text":"x","mode":"whenever"}`,
		`{"sessionId":%q,"text":"x","mode":"debounce"}`,
		`{"sessionId":%q,"text":"x","mode":"debounce","debounce":"100ms"}`,
		`{"sessionId":%q,"text":"x","mode":"queue","debounce":"1s"}`,
	} {
		if code, b := e.post("/v1/deliveries", fmt.Sprintf(body, id)); code != http.StatusBadRequest {
			t.Fatalf("%s = %d %s, want 400", fmt.Sprintf(body, id), code, b)
		}
	}
}

// TestDefaultMode: a session's default mode (on create, and changed by
// PATCH) applies to a delivery that names no mode.
func TestDefaultMode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"busy.default","text":"/sleep 2s","defaultMode":"reject"}`).SessionID
	e.waitEvents(id, "the step running", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventTurnStarted) == 1 })
	rej := e.deliver(fmt.Sprintf(`{"sessionId":%q,"text":"no mode"}`, id))
	evs := e.waitEvents(id, "the reject", func(evs []wire.Event) bool { return len(harness.TerminalOutcomes(evs)[rej.CommandID]) > 0 })
	if got := outcomeOf(t, evs, rej.CommandID); got != wire.EventCommandRejected {
		t.Fatalf("a delivery with the default mode reject during a step ended with %s", got)
	}
	if cp := e.checkpointOf(id); cp.DefaultMode != wire.ModeReject {
		t.Fatalf("the checkpoint's default mode is %q", cp.DefaultMode)
	}
	code, b := e.call(http.MethodPatch, "/v1/sessions/"+id, `{"defaultMode":"queue"}`, testToken)
	if code != http.StatusAccepted {
		t.Fatalf("PATCH defaultMode = %d %s", code, b)
	}
	e.eventually(20*time.Second, "the default mode back to queue", func() bool { return e.checkpointOf(id).DefaultMode == "" })
	for _, body := range []string{`{"defaultMode":"sometimes"}`, `{"defaultMode":"debounce"}`, `{"defaultMode":"queue","tags":{"a":"b"}}`, `{"defaultDebounce":"1s"}`} {
		if code, b := e.call(http.MethodPatch, "/v1/sessions/"+id, body, testToken); code != http.StatusBadRequest {
			t.Fatalf("PATCH %s = %d %s, want 400", body, code, b)
		}
	}
}
