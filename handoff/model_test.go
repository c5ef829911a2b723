package handoff_test

import (
	"flag"
	"os"
	"strconv"
	"testing"

	"github.com/baton-rt/baton/internal/testsize"
	"pgregory.net/rapid"
)

// TestRandomFaults draws up to four faults at random crash points of either
// side (combinations the single-fault matrix does not reach: a stalled
// candidate and a source crash, a lost reply then a stall...) and a
// candidate behaviour, runs the real executor and Activate on the
// in-memory store, recovers, and checks the scenario invariants: one
// owner, fenced late commits, nothing lost, no marker left after Clean.
func TestRandomFaults(t *testing.T) {
	faults := []fault{fCrash, fStall, fCommand, fLate, fReplyLost}
	rapid.Check(t, func(rt *rapid.T) {
		m := mode(rapid.IntRange(0, 2).Draw(rt, "mode"))
		fs := map[point]fault{}
		for range rapid.IntRange(0, 4).Draw(rt, "faults") {
			p := rapid.SampledFrom(allPoints()).Draw(rt, "point")
			fs[p] = rapid.SampledFrom(faults).Draw(rt, "fault")
		}
		sc := newScenario(rt, memBackend(), m, fs).run()
		sc.check()
	})
}

// TestMain raises rapid's default number of checks for this package (the
// in-memory runs are cheap); an explicit -rapid.checks wins.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		_ = flag.Set("rapid.checks", strconv.Itoa(testsize.Pick(1000, 20000)))
	}
	os.Exit(m.Run())
}
