package pool

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// stateAgent keeps the state a delivery names and echoes what it sees:
// "state <n>" keeps n bytes of state, "sleep <d> …" sleeps first and keeps
// the turn open (a steer joins the next step); every step outputs
// "len=<bytes of state it was given>" and then each input's text.
type stateAgent struct{ fast bool } // fast: sleep directives do not sleep

func (stateAgent) EventKinds() []string { return nil }

func (a stateAgent) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	r := runtime.StepResult{Outcome: runtime.OutcomeDone}
	r.Events = append(r.Events, runtime.Output("len="+strconv.Itoa(len(in.State))))
	for _, c := range in.Inputs {
		name, arg, _ := strings.Cut(c.Text, " ")
		switch name {
		case "state":
			n, _ := strconv.Atoi(arg)
			r.State = json.RawMessage(`"` + strings.Repeat("s", n-2) + `"`)
		case "sleep":
			arg, _, _ = strings.Cut(arg, " ")
			d, _ := time.ParseDuration(arg)
			if a.fast {
				d = 0
			}
			r.Outcome = runtime.OutcomeContinue
			select {
			case <-ctx.Done():
				return runtime.StepResult{}, ctx.Err()
			case <-time.After(d):
			}
		}
		r.Events = append(r.Events, runtime.Output(c.Text))
	}
	return r, nil
}

func withAgent(a runtime.Agent) func(*Config) { return func(c *Config) { c.Agent = a } }

// blob reads a session blob straight from the object store.
func (e *env) blob(id string, ref wire.BlobRef) ([]byte, error) {
	obs, err := e.JS.ObjectStore(e.t.Context(), e.Names.StateBucket())
	if err != nil {
		e.t.Fatal(err)
	}
	return obs.GetBytes(e.t.Context(), wire.BlobName(id, ref))
}

// fullOutputs are the session's output texts, out-of-line ones read back.
func (e *env) fullOutputs(id string, evs []wire.Event) []string {
	e.t.Helper()
	var out []string
	for _, d := range harness.AllData[wire.MessageOutput](e.t, evs, wire.EventMessageOutput) {
		if d.Ref != nil {
			b, err := e.blob(id, *d.Ref)
			if err != nil {
				e.t.Fatal(err)
			}
			d.Text = string(b)
		}
		out = append(out, d.Text)
	}
	return out
}

// checkpointOf decodes the session's checkpoint as stored.
func (e *env) checkpointOf(id string) wire.Checkpoint {
	e.t.Helper()
	cur, _ := e.session(id)
	cp, err := wire.DecodeCheckpoint(cur.Record.Checkpoint)
	if err != nil {
		e.t.Fatal(err)
	}
	return cp
}

// A long message.output goes to the session's blob (written before its
// commit) and the durable event holds the reference; the record stays
// small and its checkpoint at state version 1 (nothing new is needed).
func TestOutputOutOfLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("/big 600000"))
	evs := e.WaitFor(id, "turn.completed", func(evs []wire.Event) bool { return harness.Count(evs, wire.EventTurnCompleted) == 1 })
	var refs []wire.MessageOutput
	for _, d := range harness.AllData[wire.MessageOutput](t, evs, wire.EventMessageOutput) {
		if d.Ref != nil {
			refs = append(refs, d)
		}
	}
	if len(refs) != 1 || refs[0].Text != "" || refs[0].Ref.Size != 600000 {
		t.Fatalf("want one referenced output of 600000 bytes, got %+v", refs)
	}
	b, err := e.blob(id, *refs[0].Ref)
	if err != nil || refs[0].Ref.Verify(b) != nil || !strings.HasPrefix(string(b), "Baton keeps this text durable.") {
		t.Fatalf("blob: %v %v", err, refs[0].Ref.Verify(b))
	}
	cur, _ := e.session(id)
	if n := len(cur.Record.Checkpoint); n > 32<<10 {
		t.Fatalf("checkpoint is %d bytes with the output out of line", n)
	}
	if cp := e.checkpointOf(id); cp.StateV != 1 {
		t.Fatalf("checkpoint at state version %d, want 1 (no state or input ref)", cp.StateV)
	}
	e.Send(id, harness.Deliver("next"))
	e.WaitOutput(id, "next")
}

// Agent state above the inline limit lives in a blob referenced by the
// checkpoint (state version 2); a restarted owner reads it back; a new
// state supersedes the old blob, which is deleted; a small state is inline
// again and the checkpoint back at state version 1.
func TestStateOutOfLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.owner("v1", "p1", withAgent(stateAgent{}))
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("state 300000"))
	e.WaitOutput(id, "state 300000")
	cp := e.checkpointOf(id)
	if cp.StateV != 2 || cp.StateRef == nil || cp.State != nil || cp.StateRef.Size != 300000 {
		t.Fatalf("checkpoint stateV %d stateRef %+v inline %d bytes", cp.StateV, cp.StateRef, len(cp.State))
	}
	_ = first.Stop()
	e.owner("v1", "p1", withAgent(stateAgent{}))
	e.Send(id, harness.Deliver("state 200000"))
	e.WaitOutput(id, "state 200000")
	if evs := e.Events(id); !slices.Contains(harness.Outputs(evs), "len=300000") {
		t.Fatalf("the restarted owner did not read the state back: %q", harness.Outputs(evs))
	}
	old := *cp.StateRef
	e.Eventually(wait, "the superseded state blob deleted", func() bool {
		_, err := e.blob(id, old)
		return errors.Is(err, jetstream.ErrObjectNotFound)
	})
	cp2 := e.checkpointOf(id)
	e.Send(id, harness.Deliver("state 10"))
	e.WaitOutput(id, "state 10")
	if cp := e.checkpointOf(id); cp.StateV != 1 || cp.StateRef != nil || string(cp.State) != `"ssssssss"` {
		t.Fatalf("small state: stateV %d ref %v state %s", cp.StateV, cp.StateRef, cp.State)
	}
	e.Eventually(wait, "the second state blob deleted", func() bool {
		_, err := e.blob(id, *cp2.StateRef)
		return errors.Is(err, jetstream.ErrObjectNotFound)
	})
	e.CheckStream(e.Events(id))
}

// A steering delivery whose text is over the inline limit joins the open
// turn: the checkpoint holds it by reference (state version 2) while the
// next step runs; a restart in that step reads it back and the step sees
// the whole text.
func TestInputTextOutOfLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.owner("v1", "p1", withAgent(stateAgent{}))
	id := e.Start("v1").SessionID
	long := "sleep 30s " + strings.Repeat("x", 300<<10)
	e.Send(id, harness.Deliver("sleep 1s"))
	e.WaitKind(id, wire.EventTurnStarted, 1)
	e.Send(id, harness.Steer(long))
	e.Eventually(wait, "the steer committed by reference", func() bool {
		cp := e.checkpointOf(id)
		return cp.StateV == 2 && len(cp.Turn.Inputs) == 1 && cp.Turn.Inputs[0].TextRef != nil
	})
	_ = first.Stop() // in the 30 s step that got the long text
	e.owner("v1", "p1", withAgent(stateAgent{fast: true}))
	evs := e.WaitFor(id, "the long text echoed", func(evs []wire.Event) bool { return slices.Contains(e.fullOutputs(id, evs), long) })
	e.CheckStream(evs)
}

// A committed outbox holding an event of a data version newer than this
// build knows is re-published unchanged: re-publishing validates envelopes
// only.
func TestRepublishNewerEventVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.owner("v1", "p1")
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("hello"))
	e.WaitOutput(id, "hello")
	_ = first.Stop()
	cur, _ := e.session(id)
	cp, err := wire.DecodeCheckpoint(cur.Record.Checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	future := wire.Event{SessionID: id, Seq: cp.EventSeq + 1, Time: time.Now().UTC(), OwnerRunID: cur.Record.OwnerRunID,
		DeploymentID: "v1", Kind: wire.EventMessageOutput, V: 2, Data: json.RawMessage(`{"text":"from the future","tone":"calm"}`)}
	// The outbox keeps what the stopped owner had not published yet (on a
	// loaded machine Stop can cut the last commit's publish short): the
	// next owner publishes those first, then the future event.
	stored := uint64(len(e.Events(id)))
	var unpublished []wire.Event
	for _, ev := range cp.Outbox {
		if ev.Seq > stored {
			unpublished = append(unpublished, ev)
		}
	}
	cp.Outbox, cp.EventSeq = append(unpublished, future), cp.EventSeq+1
	if cur.Record.Checkpoint, err = wire.EncodeCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Store.UpdateSession(e.t.Context(), cur.Record, cur.Revision); err != nil {
		t.Fatal(err)
	}
	e.owner("v1", "p1")
	evs := e.WaitFor(id, "the future event published", func(evs []wire.Event) bool { return len(evs) >= int(future.Seq) })
	got := evs[future.Seq-1]
	if got.Kind != wire.EventMessageOutput || got.V != 2 || string(got.Data) != string(future.Data) {
		t.Fatalf("re-published %+v, want %+v", got, future)
	}
	e.Send(id, harness.Deliver("after"))
	e.WaitOutput(id, "after")
	e.CheckStream(e.Events(id))
}
