package chaos

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/wire"
)

// TestChaos runs the traffic under faults (see the package doc): 8
// sessions and 35 s of faults in make test, 30 sessions and 150 s under
// make soak. BATON_CHAOS_SEED replays a run's draw of faults.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos: real processes for a minute or more")
	}
	n := testsize.Pick(8, 30)
	faultsFor := time.Duration(testsize.Pick(30, 150)) * time.Second
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BATON_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("BATON_CHAOS_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (BATON_CHAOS_SEED replays it)", seed)

	w := newWorld(t, startNATS(t))
	for _, dep := range deployments {
		for i := 1; i <= 2; i++ {
			w.owners = append(w.owners, &owner{dep: dep, pid: fmt.Sprintf("%s-%d", dep, i)})
		}
	}
	for i, o := range w.owners {
		w.h.Check(w.startOwner(o))
		if i == 0 {
			w.observe() // the first owner created the topology
		}
	}
	for _, dep := range deployments {
		w.startIngress(dep)
	}
	t.Logf("topology up (3 NATS nodes, 2×2 owners, 2 ingresses) in %s; times below count from %s",
		time.Since(w.began).Round(time.Millisecond), w.began.UTC().Format("15:04:05.000"))

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sessions := make([]*session, n)
	for i := range sessions {
		sessions[i] = &session{i: i}
	}
	w.h.Check(harness.Each(sessions, 8, func(s *session) error { return w.create(ctx, s) }))

	stop := make(chan struct{})
	traffic := make(chan error, 1)
	go func() {
		traffic <- harness.Each(sessions, n, func(s *session) error { return w.run(ctx, s, stop) })
	}()
	faultsAt := time.Now()
	counts := w.chaos(seed, faultsFor, 5*time.Second)
	t.Logf("faults for %s: %v", time.Since(faultsAt).Round(time.Millisecond), counts)
	close(stop)
	if err := <-traffic; err != nil {
		w.report()
		t.Fatal(err)
	}

	// Every accepted delivery applied and its turn ended (the steps checked
	// below must not race the last turn's step), then the tail has read
	// everything.
	for _, id := range w.accepted.Sessions() {
		acc := w.accepted.Get(id)
		err := w.tail.WaitApplied(ctx, id, acc[len(acc)-1].Seq, 2*wait)
		if err == nil {
			err = w.tail.WaitSettled(ctx, id, wait)
		}
		if err != nil {
			w.report()
			t.Fatal(err)
		}
	}
	w.h.Check(w.tail.WaitCaughtUp(ctx, w.JS, w.Names, wait))
	w.report()
	w.checkCommands(sessions)
	w.checkSteps(sessions)
	w.latency()
	t.Logf("total %s", time.Since(w.began).Round(time.Millisecond))
}

// report logs the faults and the errors of the goroutines.
func (w *world) report() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range w.faults {
		w.t.Logf("fault %s", f)
	}
	for _, e := range w.errs {
		w.t.Errorf("%s", e)
	}
}

// checkCommands: every session's events are contiguous from 1, and its
// command.applied events name exactly its accepted commands, each once, in
// acceptance order.
func (w *world) checkCommands(sessions []*session) {
	t := w.t
	total := 0
	for _, s := range sessions {
		evs := w.tail.Events(s.id)
		if err := harness.Contiguous(evs, 0); err != nil {
			t.Errorf("session %s: %v: %s", s.id, err, harness.Trace(evs))
		}
		applied := w.h.Applied(evs)
		acc := w.accepted.Get(s.id)
		total += len(acc)
		accepted := map[uint64]harness.Accepted{}
		for _, a := range acc {
			accepted[a.Seq] = a
		}
		seen := map[uint64]bool{}
		for i, a := range applied {
			if seen[a.Seq] {
				t.Errorf("session %s: command seq %d applied twice", s.id, a.Seq)
			}
			seen[a.Seq] = true
			if _, ok := accepted[a.Seq]; !ok {
				t.Errorf("session %s: command seq %d applied but never accepted", s.id, a.Seq)
			}
			if i > 0 && a.Seq <= applied[i-1].Seq {
				t.Errorf("session %s: command seq %d applied after seq %d: out of acceptance order", s.id, a.Seq, applied[i-1].Seq)
			}
		}
		for _, a := range acc {
			if !seen[a.Seq] {
				t.Errorf("session %s: accepted delivery %s (seq %d via %s) never applied: %s", s.id, a.Key, a.Seq, a.Via, harness.Trace(evs))
			}
		}
	}
	t.Logf("commands: %d accepted over %d sessions", total, len(sessions))
}

// checkSteps: every committed step (turn.step) ran in the process whose
// run committed it, and every other run of it — and every run of a step
// never committed — was cut short by a fault (its incarnation SIGKILLed or
// fenced, or its session stopped there). No step ran twice in
// incarnations no fault cut.
func (w *world) checkSteps(sessions []*session) {
	t := w.t
	execs := w.execs()
	stops := w.stops()
	reran := 0
	committed := 0
	for _, s := range sessions {
		evs := w.tail.Events(s.id)
		stops := append(slices.Clone(stops), harness.InterruptedStops(s.id, evs)...)
		runsOf := harness.StepRuns(execs, s.id)
		done := map[string]bool{}
		for _, ev := range evs {
			if ev.Kind != wire.EventTurnStep {
				continue
			}
			d := harness.FirstData[wire.TurnStep](t, []wire.Event{ev}, wire.EventTurnStep)
			k := fmt.Sprintf("%s/%d", d.TurnID, d.Step)
			if done[k] {
				t.Errorf("step %s/%s committed twice", s.id, k)
			}
			done[k] = true
			committed++
			runs := runsOf[k]
			pid := w.records.Process(ev.OwnerRunID)
			if len(runs) == 0 || pid != "" && pidOf(runs[len(runs)-1].Process) != pid {
				t.Errorf("step %s/%s committed by %s (run %s): its last run is not there (runs %v)", s.id, k, pid, ev.OwnerRunID, runs)
				continue
			}
			if _, err := harness.RerunEvidence(runs, stops); err != nil {
				t.Error(err)
			}
			if len(runs) > 1 {
				reran++
			}
		}
		for k, runs := range runsOf {
			if !done[k] {
				if err := harness.UncommittedEvidence(runs, stops); err != nil {
					t.Error(err)
				}
			}
		}
	}
	t.Logf("steps: %d committed, %d ran again after a stop of their first run", committed, reran)
}

// pidOf is an incarnation's process ID (blue-1#2 → blue-1).
func pidOf(inc string) string {
	for i := len(inc) - 1; i >= 0; i-- {
		if inc[i] == '#' {
			return inc[:i]
		}
	}
	return inc
}
