package session_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/wire"
	"github.com/oklog/ulid/v2"
)

// historian answers like echo and keeps the history of every step.
type historian struct {
	echo
	mu   sync.Mutex
	seen [][]runtime.Entry
}

func (a *historian) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	a.mu.Lock()
	a.seen = append(a.seen, in.History)
	a.mu.Unlock()
	return a.echo.Step(ctx, in)
}

func (a *historian) last() []runtime.Entry {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		return nil
	}
	return a.seen[len(a.seen)-1]
}

// A session whose checkpoint an owner of state version 2 wrote — its
// history in the legacy {role, text} shape, partly in a sealed segment —
// boots on this build, and its agent's next step sees that history
// migrated, then the new delivery.
func TestLegacyCheckpointRuns(t *testing.T) {
	a := &historian{}
	r := newRig(t, func(e *session.Env) { e.Agent = a })
	ctx := context.Background()
	segment := []byte(`[{"role":"user","text":"hi"},{"role":"agent","text":"hello"},{"role":"task","text":"t1-1-task: 7"}]`)
	ref := wire.NewBlobRef(segment)
	if err := r.env.Blobs.Put(ctx, ref.Digest, segment); err != nil {
		t.Fatal(err)
	}
	cp := []byte(`{"stateV":2,"sessionId":"` + r.id + `","historySegments":[{"digest":"` + ref.Digest + `","size":` +
		strconv.Itoa(len(segment)) + `}],"history":[{"role":"input","text":"\"blue\""}],"eventSeq":0,"tokens":["` + r.id +
		`"],"applied":{"low":1},"turn":{"count":1}}`)
	rec, err := record.New(r.id, record.Owner{RunID: ulid.Make().String(), Deployment: "v1", Process: "p1", WireV: wire.CurrentVersion}, cp)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := r.records.CreateSession(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	d, err := session.ReadCheckpoint(ctx, r.env, r.id, cp)
	if err != nil {
		t.Fatal(err)
	}
	r.s, err = session.New(r.env, session.Boot{Record: rec, Revision: rev, Checkpoint: d, Tokens: d.Tokens})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	t.Cleanup(func() { cancel(); <-r.done })
	go func() { r.done <- r.s.Run(runCtx, runtime.BootRecover) }()

	r.send(deliver("next"))
	r.eventually("the step ran", func() bool { return len(a.last()) > 0 })
	got := a.last()
	want := []runtime.Entry{
		{Role: runtime.RoleUser, Content: []runtime.Part{runtime.TextPart("hi")}},
		runtime.AssistantText("hello"),
		{Role: runtime.RoleUser, Kind: runtime.EntryTaskResult, Content: []runtime.Part{runtime.TextPart("t1-1-task: 7")}},
		{Role: runtime.RoleUser, Kind: runtime.EntryInputResponse, Content: []runtime.Part{runtime.TextPart(`"blue"`)}},
		{Role: runtime.RoleUser, Content: []runtime.Part{runtime.TextPart("next")}},
	}
	if len(got) != len(want) {
		t.Fatalf("history %+v", got)
	}
	for i := range want {
		if g, w := got[i], want[i]; g.Role != w.Role || g.Kind != w.Kind || g.Text() != w.Text() {
			t.Fatalf("entry %d: %+v, want %+v", i, g, w)
		}
	}
	r.eventually("the answer", func() bool { return len(r.outputs()) == 1 && r.outputs()[0] == "next" })
	// The commit after it, with nothing new in it, keeps a state version
	// an older owner reads.
	r.eventually("a commit", func() bool {
		v, _ := wire.ReadStateVersion(r.record().Record.Checkpoint)
		return r.record().Revision > rev && v < 3
	})
}
