package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// blobAgent makes every turn store three blobs no other turn stores: the
// delivery's own long text (an input text blob, referred to while the
// turn is open), a long output that differs from it (referred to by its
// event) and a new long state (referred to until the next one replaces
// it).
type blobAgent struct{}

func (blobAgent) EventKinds() []string { return nil }

func (blobAgent) Step(_ context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	r := runtime.StepResult{Outcome: runtime.OutcomeDone}
	for _, c := range in.Inputs {
		n, _, _ := strings.Cut(c.Text, " ")
		r.Events = append(r.Events, runtime.Output("output of turn "+n+" "+strings.Repeat("o", 9<<10)))
		r.State = json.RawMessage(strconv.Quote("state of turn " + n + " " + strings.Repeat("s", wire.MaxInlineBytes+1)))
	}
	return r, nil
}

// TestBlobsCollectedWhileLive: a session whose every turn stores a long
// input text, a long output and a new long state keeps exactly the blobs
// its committed checkpoint, its history and its events refer to — object
// by object — after 100 turns: the inputs' texts and the replaced states
// are deleted, the outputs stay (their events refer to them).
func TestBlobsCollectedWhileLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1", withAgent(blobAgent{}))
	id := e.Start("v1").SessionID
	const turns = 100
	for i := 1; i <= turns; i++ {
		e.Send(id, harness.Deliver(strconv.Itoa(i)+" "+strings.Repeat("i", 9<<10)))
		e.WaitFor(id, fmt.Sprintf("turn %d", i), func(evs []wire.Event) bool { return harness.Count(evs, wire.EventTurnCompleted) == i })
	}
	b := e.sessionBlobs(id)
	if ok, diff := b.Exact(); !ok {
		t.Fatalf("after %d turns the session stores other blobs than it refers to:\n%s", turns, strings.Join(diff, "\n"))
	}
	if len(b.Stored) != turns+1 {
		t.Fatalf("%d blobs stored, want %d outputs and the state", len(b.Stored), turns)
	}
}

// sessionBlobs reads what session id stores and refers to.
func (e *env) sessionBlobs(id string) harness.SessionBlobs {
	e.t.Helper()
	evs, err := e.Env.Events(e.t.Context(), id)
	e.Check(err)
	b, err := harness.ReadSessionBlobs(e.t.Context(), e.JS, e.Names, id, e.checkpointOf(id), evs)
	e.Check(err)
	return b
}
