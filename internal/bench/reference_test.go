package bench

import (
	"math"
	"strings"
	"testing"
)

func lines(t *testing.T, s string) []Line {
	t.Helper()
	ls, err := ParseLines(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// A reference is each figure's median ratio over the runs, its spread and
// twice that as the tolerance (at least MinTolerance); figures without a
// baseline are not in it; a throughput figure is better higher.
func TestBuildReference(t *testing.T) {
	var runs [][]Line
	for _, r := range []string{"2.0", "2.2", "1.8", "2.1", "2.4"} {
		runs = append(runs, lines(t, "noise\n"+
			"BENCH name=raw n=1 p50_us=40.0 p99_us=50.0\n"+
			"BENCH name=lat n=9 p50_us=80.0 p99_us=99.0 baseline=raw ratio="+r+" sessions=1\n"+
			"BENCH name=tput n=9 p50_us=0.0 p99_us=0.0 ops_per_s=2000 baseline=rawtput ratio=0.300\n"))
	}
	figs := BuildReference(runs)
	if len(figs) != 2 || figs[0].Name != "lat" || figs[1].Name != "tput" {
		t.Fatalf("figures %+v", figs)
	}
	lat, tput := figs[0], figs[1]
	if lat.Ratio != 2.1 || math.Abs(lat.Spread-0.3/2.1) > 1e-9 || math.Abs(lat.Tolerance-0.6/2.1) > 1e-9 || lat.HigherIsBetter || lat.Runs != 5 {
		t.Fatalf("lat %+v", lat)
	}
	if tput.Spread != 0 || tput.Tolerance != MinTolerance || !tput.HigherIsBetter {
		t.Fatalf("tput %+v", tput)
	}
	back, err := ParseReference(strings.NewReader("# a comment\n" + FormatReference(figs)))
	if err != nil || len(back) != 2 || back[0].Name != "lat" || back[0].Ratio != 2.1 || !back[1].HigherIsBetter {
		t.Fatalf("round trip %+v %v", back, err)
	}
	if _, err := ParseReference(strings.NewReader("REF name=x ratio=abc tolerance=0.1\n")); err == nil {
		t.Fatal("a bad ratio parsed")
	}
}

// A check flags a figure worse than its reference by more than the
// tolerance, in the figure's direction, and reports one the run lacks.
func TestCheck(t *testing.T) {
	ref := []Figure{
		{Name: "lat", Ratio: 2, Tolerance: 0.2},
		{Name: "tput", Ratio: 0.5, Tolerance: 0.2, HigherIsBetter: true},
		{Name: "gone", Ratio: 1, Tolerance: 0.2},
	}
	for _, tc := range []struct {
		run             string
		latBad, tputBad bool
	}{
		{"lat ratio=2.3 / tput ratio=0.45", false, false},
		{"lat ratio=2.5 / tput ratio=0.45", true, false},
		{"lat ratio=1.0 / tput ratio=0.39", false, true},
		{"lat ratio=2.0 / tput ratio=0.9", false, false},
	} {
		lat, tput, _ := strings.Cut(tc.run, " / ")
		run := lines(t, "BENCH name="+strings.Replace(lat, " ", " n=1 p50_us=9 baseline=b ", 1)+"\n"+
			"BENCH name="+strings.Replace(tput, " ", " n=1 p50_us=0 ops_per_s=5 baseline=b ", 1)+"\n")
		v := Check(ref, run)
		if v[0].Worse != tc.latBad || v[1].Worse != tc.tputBad {
			t.Errorf("%s: worse lat=%v tput=%v, want %v %v (%+v)", tc.run, v[0].Worse, v[1].Worse, tc.latBad, tc.tputBad, v)
		}
		if v[2].Ratio != 0 || v[2].Worse {
			t.Errorf("%s: a missing figure %+v", tc.run, v[2])
		}
	}
}
