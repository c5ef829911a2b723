package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"pgregory.net/rapid"
)

// mapJournal is a JournalStore over a map (package memory imports this
// one); writes counts the entries created.
type mapJournal struct {
	mu     sync.Mutex
	seq    uint64
	m      map[string][]byte
	revs   map[string]uint64
	writes int
}

func newMapJournal() *mapJournal {
	return &mapJournal{m: map[string][]byte{}, revs: map[string]uint64{}}
}

func (j *mapJournal) Get(_ context.Context, key string) ([]byte, uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	d, ok := j.m[key]
	if !ok {
		return nil, 0, record.ErrNotFound
	}
	return d, j.revs[key], nil
}

func (j *mapJournal) Create(_ context.Context, key string, data []byte) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.m[key]; ok {
		return 0, record.ErrExists
	}
	j.seq++
	j.m[key], j.revs[key] = data, j.seq
	j.writes++
	return j.seq, nil
}

func (j *mapJournal) Update(_ context.Context, key string, data []byte, rev uint64) (uint64, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.revs[key] != rev {
		return 0, record.ErrConflict
	}
	j.seq++
	j.m[key], j.revs[key] = data, j.seq
	return j.seq, nil
}

func (j *mapJournal) Delete(_ context.Context, key string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.m, key)
	return nil
}

func testJournal(store JournalStore, in runtime.StepInput, rerun bool) *journal {
	return &journal{store: store, blobs: newBlobStore(&mapBlobs{m: map[string][]byte{}}, nil), log: slog.New(slog.DiscardHandler),
		session: in.SessionID, in: in, rerun: rerun}
}

// errCrash stands for the process dying inside a call: the call panics
// with it, so Do never records anything.
var errCrash = errors.New("crash")

// TestJournalProperty: runs of one step against its journal, each ending
// in a crash at a random point (inside a call, or right after a call's
// entry was written) or completing, some with changed inputs (a steer)
// and some asking for another name at a recorded position. A call whose
// result was recorded is never executed again and returns the recorded
// bytes; another name at a recorded position fails the step with
// nondeterministic_step; changed inputs discard the journal (the calls
// execute afresh and return the new generation's results).
func TestJournalProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		store := newMapJournal()
		in := runtime.StepInput{SessionID: "01SESSION000000000000000AA", TurnID: "t1", Step: 1,
			Inputs: []runtime.Command{{Kind: runtime.KindDeliver, Text: "go"}}}
		names := rapid.SliceOfN(rapid.SampledFrom([]string{"model", "search", "pay"}), 1, 6).Draw(rt, "names")
		m := &journalModel{rt: rt, journaled: map[[2]int]bool{}}
		for run := range rapid.IntRange(1, 6).Draw(rt, "runs") {
			if run > 0 && rapid.Float64Range(0, 1).Draw(rt, "change inputs") < 0.2 {
				m.gen++
				in.Inputs = append(in.Inputs, runtime.Command{Kind: runtime.KindDeliver, Text: fmt.Sprint("steer ", m.gen)})
			}
			seq, swap := names, -1
			if n := m.recorded(len(names)); n > 0 && rapid.Float64Range(0, 1).Draw(rt, "nondeterministic") < 0.15 {
				swap = rapid.IntRange(1, n).Draw(rt, "swap at")
				seq = append([]string(nil), names...)
				seq[swap-1] = "other"
			}
			crashAt := rapid.IntRange(1, len(seq)+1).Draw(rt, "crash at") // len+1: no crash
			inside := rapid.Bool().Draw(rt, "crash inside the call")
			m.run(testJournal(store, in, run > 0), seq, swap, crashAt, inside)
		}
	})
}

// journalModel tracks which calls of which input generation have a
// recorded result.
type journalModel struct {
	rt        *rapid.T
	gen       int
	journaled map[[2]int]bool // {generation, position}
}

// recorded is how many leading positions of the generation are recorded.
func (m *journalModel) recorded(max int) int {
	n := 0
	for n < max && m.journaled[[2]int{m.gen, n + 1}] {
		n++
	}
	return n
}

// run is one run of the step: calls in order until the crash point.
func (m *journalModel) run(j *journal, seq []string, swap, crashAt int, inside bool) {
	for n, name := range seq {
		pos := n + 1
		if pos == crashAt && inside && !m.journaled[[2]int{m.gen, pos}] && pos != swap {
			m.crashInside(j, name, pos)
			return
		}
		res, err := j.Do(context.Background(), name, m.effect(pos, name))
		if pos == swap {
			m.nondeterministic(j, err, pos)
			return
		}
		if err != nil || string(res) != resultOf(m.gen, pos) {
			m.rt.Fatalf("call %d (%s): %q, %v; want %q", pos, name, res, err, resultOf(m.gen, pos))
		}
		m.journaled[[2]int{m.gen, pos}] = true
		if pos == crashAt {
			return // crashed right after the entry was written
		}
	}
}

// crashInside runs a call that dies inside fn: executed, nothing recorded.
func (m *journalModel) crashInside(j *journal, name string, pos int) {
	defer func() {
		if p := recover(); p != errCrash {
			panic(p)
		}
	}()
	_, _ = j.Do(context.Background(), name, func(ctx context.Context, key string) ([]byte, error) {
		_, _ = m.effect(pos, name)(ctx, key)
		panic(errCrash)
	})
}

func (m *journalModel) nondeterministic(j *journal, err error, pos int) {
	var nd *runtime.NondeterministicError
	if !errors.As(err, &nd) || nd.Position != pos || nd.Requested != "other" {
		m.rt.Fatalf("call %d with another name at a recorded position: %v, want a NondeterministicError", pos, err)
	}
	if d := j.outcome(runtime.StepDone{Result: runtime.StepResult{Outcome: runtime.OutcomeDone}}); d.Result.Code != runtime.CodeNondeterministic {
		m.rt.Fatalf("the step's result after a nondeterministic call: %+v", d.Result)
	}
}

// effect is call pos: it must get its own idempotency key and must never
// run once its result is recorded for the current inputs.
func (m *journalModel) effect(pos int, name string) runtime.EffectFunc {
	return func(_ context.Context, key string) ([]byte, error) {
		if !strings.HasSuffix(key, fmt.Sprintf("/%d/%s", pos, name)) {
			m.rt.Fatalf("call %d got key %q", pos, key)
		}
		if m.journaled[[2]int{m.gen, pos}] {
			m.rt.Fatalf("call %d of generation %d executed again after its result was recorded", pos, m.gen)
		}
		return []byte(resultOf(m.gen, pos)), nil
	}
}

func resultOf(gen, pos int) string { return fmt.Sprintf("result %d of generation %d", pos, gen) }

// Two runs of one step race on its journal: the stale run (a frozen owner
// resumed) executes a call its successor already recorded; its Do returns
// the successor's recorded result, not its own.
func TestJournalLostRaceReturnsTheWinnersResult(t *testing.T) {
	store := newMapJournal()
	in := runtime.StepInput{SessionID: "01SESSION000000000000000AA", TurnID: "t2", Step: 1}
	ctx := context.Background()
	call := func(who string) runtime.EffectFunc {
		return func(context.Context, string) ([]byte, error) { return []byte("by " + who), nil }
	}
	stale := testJournal(store, in, false)
	if res, err := stale.Do(ctx, "model", call("stale")); err != nil || string(res) != "by stale" {
		t.Fatalf("stale call 1: %q %v", res, err)
	}
	// The stale run freezes; its successor re-runs the step.
	next := testJournal(store, in, true)
	if res, err := next.Do(ctx, "model", call("successor")); err != nil || string(res) != "by stale" {
		t.Fatalf("successor call 1: %q %v, want the recorded result", res, err)
	}
	if res, err := next.Do(ctx, "pay", call("successor")); err != nil || string(res) != "by successor" {
		t.Fatalf("successor call 2: %q %v", res, err)
	}
	// The stale run resumes and makes call 2: the successor's result stands.
	res, err := stale.Do(ctx, "pay", call("stale"))
	if err != nil || string(res) != "by successor" {
		t.Fatalf("stale call 2: %q %v, want the successor's recorded result", res, err)
	}
	if store.writes != 2 {
		t.Fatalf("%d entries written, want 2", store.writes)
	}
}

// A call's final error is recorded: the re-run gets it back without
// calling fn. A call cut short by its context's end records nothing.
func TestJournalRecordsErrorsNotCancellations(t *testing.T) {
	store := newMapJournal()
	in := runtime.StepInput{SessionID: "01SESSION000000000000000AA", TurnID: "t3", Step: 2}
	ctx := context.Background()
	j := testJournal(store, in, false)
	if _, err := j.Do(ctx, "search", func(context.Context, string) ([]byte, error) { return nil, errors.New("no results") }); err == nil {
		t.Fatal("the call's error was not returned")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := j.Do(cctx, "model", func(ctx context.Context, _ string) ([]byte, error) { return nil, ctx.Err() }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}
	if store.writes != 1 {
		t.Fatalf("%d entries written, want 1 (the error, not the cancellation)", store.writes)
	}
	again := testJournal(store, in, true)
	_, err := again.Do(ctx, "search", func(context.Context, string) ([]byte, error) {
		t.Fatal("a call with a recorded error ran again")
		return nil, nil
	})
	var ee *runtime.EffectError
	if !errors.As(err, &ee) || ee.Message != "no results" {
		t.Fatalf("replayed error: %v", err)
	}
	if res, err := again.Do(ctx, "model", func(context.Context, string) ([]byte, error) { return []byte("ok"), nil }); err != nil || string(res) != "ok" {
		t.Fatalf("the cancelled call on the re-run: %q %v", res, err)
	}
}

// A result over wire.MaxJournalInline goes to the blob store; the re-run
// gets it back whole.
func TestJournalLargeResultOutOfLine(t *testing.T) {
	store := newMapJournal()
	in := runtime.StepInput{SessionID: "01SESSION000000000000000AA", TurnID: "t4", Step: 1}
	blobs := newBlobStore(&mapBlobs{m: map[string][]byte{}}, nil)
	big := []byte(strings.Repeat("x", 200<<10))
	j := testJournal(store, in, false)
	j.blobs = blobs
	if _, err := j.Do(context.Background(), "fetch", func(context.Context, string) ([]byte, error) { return big, nil }); err != nil {
		t.Fatal(err)
	}
	for k, v := range store.m {
		if len(v) > 1<<10 {
			t.Fatalf("entry %s is %d bytes: the result was stored inline", k, len(v))
		}
	}
	again := testJournal(store, in, true)
	again.blobs = blobs
	res, err := again.Do(context.Background(), "fetch", func(context.Context, string) ([]byte, error) {
		return nil, errors.New("ran again")
	})
	if err != nil || string(res) != string(big) {
		t.Fatalf("replayed large result: %d bytes, %v", len(res), err)
	}
}
