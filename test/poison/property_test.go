package poison_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/wire"
)

// TestPoisonProperty drives a real owner with random sequences of
// deliveries whose results are drawn from every kind of good and bad result
// (scripted agent), and after each sequence checks: every bad result cost
// exactly its step (an error event with the expected code, the turn ended,
// the next delivery answered); a fatal result ends the session and the next
// delivery gets 410; every accepted command applied exactly once; event
// seqs contiguous; the record's epoch unchanged (no reboot); no step ran
// twice; the record under the KV limit. It runs for a time budget (15 s,
// 2 min under make soak); POISON_SEED replays a run.
func TestPoisonProperty(t *testing.T) {
	budget := time.Duration(testsize.Pick(15, 120)) * time.Second
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("POISON_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (POISON_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	e := newEnv(t)
	log := &stepLog{}
	e.owner("p1", &scripted{log: log}, func(c *pool.Config) { c.StepTimeout = 300 * time.Millisecond })
	deadline := time.Now().Add(budget)
	results := 0
	for round := 0; round < 2 || time.Now().Before(deadline); round++ {
		results += poisonRound(t, e, rng, log)
	}
	t.Logf("%d results checked", results)
}

// draw is one drawn result: the delivery text and the error code its step
// must fail with ("" = succeeds, "-" = the agent's own error, no code).
type draw struct {
	text, code string
	outputs    int // message.output events expected (when it succeeds)
	outBytes   int // the length of the one output, for out
}

func drawResult(rng *rand.Rand) draw {
	switch rng.IntN(12) {
	case 0:
		return draw{text: "ok", outputs: 1, outBytes: 2}
	case 1:
		n := sizeOf(rng, 1<<20)
		prepareOutput(n)
		return draw{text: fmt.Sprintf("out %d", n), outputs: 1, outBytes: n}
	case 2:
		n := 1 + rng.IntN(2*wire.MaxStepEvents)
		if n > wire.MaxStepEvents {
			return draw{text: fmt.Sprintf("many %d", n), code: wire.CodeEventTooLarge}
		}
		return draw{text: fmt.Sprintf("many %d", n), outputs: n}
	case 3:
		return draw{text: fmt.Sprintf("state %d", sizeOf(rng, 1<<20))}
	case 4:
		return draw{text: "kind", code: wire.CodeEventInvalid}
	case 5:
		return draw{text: "field", code: wire.CodeEventInvalid}
	case 6:
		return draw{text: "type", code: wire.CodeEventInvalid}
	case 7:
		return draw{text: "bigevent", code: wire.CodeEventTooLarge}
	case 8:
		return draw{text: "panic", code: wire.CodeAgentPanic}
	case 9:
		return draw{text: "hang", code: wire.CodeStepTimeout}
	case 10:
		return draw{text: "error", code: "-"}
	}
	return draw{text: "fatal", code: "fatal"}
}

// sizeOf draws a size from 1 B to limit, spread over the orders of magnitude.
func sizeOf(rng *rand.Rand, limit int) int {
	return max(1, int(float64(limit)/float64(uint64(1)<<rng.IntN(21)))-rng.IntN(3))
}

// poisonRound runs one session through a drawn sequence and checks it; it
// returns how many results it checked.
func poisonRound(t *testing.T, e *env, rng *rand.Rand, log *stepLog) int {
	t.Helper()
	id := e.create()
	epoch := e.record(id).Record.Epoch
	var draws []draw
	for range 3 + rng.IntN(6) {
		d := drawResult(rng)
		draws = append(draws, d)
		if d.code == "fatal" {
			break
		}
	}
	var seqs []uint64
	for _, d := range draws {
		code, r := e.deliver(id, d.text)
		if code != http.StatusAccepted {
			t.Fatalf("deliver %q: %d", d.text, code)
		}
		seqs = append(seqs, r.Seq)
	}
	last := draws[len(draws)-1]
	evs := e.waitEvents(id, fmt.Sprintf("%d turns of %s settled", len(draws), id), func(evs []wire.Event) bool {
		if last.code == "fatal" {
			return harness.Count(evs, wire.EventSessionEnded) == 1
		}
		return harness.Count(evs, wire.EventTurnCompleted) == len(draws)
	})
	checkRound(t, e, id, epoch, draws, seqs, evs)
	if last.code == "fatal" {
		if code, _ := e.deliver(id, "ok"); code != http.StatusGone {
			t.Fatalf("delivery after a fatal step: %d, want 410", code)
		}
	}
	if r := log.reruns(); len(r) > 0 {
		t.Fatalf("steps re-ran: %v", r)
	}
	return len(draws)
}

func checkRound(t *testing.T, e *env, id string, epoch uint64, draws []draw, seqs []uint64, evs []wire.Event) {
	t.Helper()
	applied := checkStream(t, evs)
	for _, s := range seqs {
		if !applied[s] {
			t.Fatalf("%s: accepted command at seq %d not applied", id, s)
		}
	}
	turns := splitTurns(evs)
	if len(turns) != len(draws) {
		t.Fatalf("%s: %d turns for %d deliveries", id, len(turns), len(draws))
	}
	for i, d := range draws {
		checkTurn(t, fmt.Sprintf("%s turn %d (%q)", id, i+1, d.text), d, turns[i])
	}
	cur := e.record(id)
	if cur.Record.Epoch != epoch {
		t.Fatalf("%s: epoch %d, was %d: the session was rebooted", id, cur.Record.Epoch, epoch)
	}
	if b, _ := json.Marshal(cur.Record); len(b) > wire.MaxRecordBytes-wire.RecordHeadroomBytes/2 {
		t.Fatalf("%s: record is %d bytes", id, len(b))
	}
}

func checkTurn(t *testing.T, what string, d draw, evs []wire.Event) {
	t.Helper()
	errs := errorsOf(evs)
	switch d.code {
	case "":
		if len(errs) > 0 {
			t.Fatalf("%s: failed: %+v", what, errs)
		}
		if n := harness.Count(evs, wire.EventMessageOutput); n != d.outputs {
			t.Fatalf("%s: %d outputs, want %d", what, n, d.outputs)
		}
		if d.outBytes > 0 {
			if got := len(outputText(t, evs[slices.IndexFunc(evs, isOutput)])); got != d.outBytes {
				t.Fatalf("%s: output of %d bytes, want %d", what, got, d.outBytes)
			}
		}
	case "fatal":
		if harness.Count(evs, wire.EventSessionEnded) != 1 || !endedFailed(evs) {
			t.Fatalf("%s: no session.ended {reason: failed}", what)
		}
	default:
		want := d.code
		if want == "-" {
			want = ""
		}
		if len(errs) != 1 || errs[0].Code != want || errs[0].Message == "" {
			t.Fatalf("%s: errors %+v, want one with code %q", what, errs, want)
		}
		if harness.Count(evs, wire.EventMessageOutput) != 0 {
			t.Fatalf("%s: a failed step's output was committed", what)
		}
	}
}

func isOutput(ev wire.Event) bool { return ev.Kind == wire.EventMessageOutput }

func endedFailed(evs []wire.Event) bool {
	for _, ev := range evs {
		if ev.Kind == wire.EventSessionEnded {
			var d wire.SessionEnded
			_ = json.Unmarshal(ev.Data, &d)
			return d.Reason == wire.EndFailed
		}
	}
	return false
}

// splitTurns groups the events of each turn, from its turn.started to its
// turn.completed (or the end of the stream).
func splitTurns(evs []wire.Event) [][]wire.Event {
	var turns [][]wire.Event
	in := false
	for _, ev := range evs {
		switch {
		case ev.Kind == wire.EventTurnStarted:
			turns, in = append(turns, []wire.Event{ev}), true
		case in:
			turns[len(turns)-1] = append(turns[len(turns)-1], ev)
			in = ev.Kind != wire.EventTurnCompleted
		}
	}
	return turns
}
