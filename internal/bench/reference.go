package bench

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Line is one parsed BENCH line: its name and its key=value fields.
type Line struct {
	Name   string
	Fields map[string]string
}

// ParseLines reads the BENCH lines of r (other lines are skipped).
func ParseLines(r io.Reader) ([]Line, error) {
	var out []Line
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "BENCH" {
			continue
		}
		l := Line{Fields: map[string]string{}}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			l.Fields[k] = v
		}
		if l.Name = l.Fields["name"]; l.Name != "" {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

func (l Line) number(key string) (float64, bool) {
	v, err := strconv.ParseFloat(l.Fields[key], 64)
	return v, err == nil
}

// Ratio is the line's ratio to its baseline, if it has one.
func (l Line) Ratio() (float64, bool) {
	r, ok := l.number("ratio")
	return r, ok && l.Fields["baseline"] != "" && r > 0
}

// HigherIsBetter reports a throughput figure (no latency, ops/s over the
// baseline's): its ratio gets worse as it falls. A latency figure's ratio
// gets worse as it rises.
func (l Line) HigherIsBetter() bool {
	p50, _ := l.number("p50_us")
	ops, _ := l.number("ops_per_s")
	return p50 == 0 && ops > 0
}

// Figure is the reference of one figure: its median ratio over the runs
// measured, their spread (the largest deviation of a run from the median,
// relative to it), and the tolerance a check allows (twice the spread, at
// least MinTolerance).
type Figure struct {
	Name           string
	Ratio          float64
	Spread         float64
	Tolerance      float64
	HigherIsBetter bool
	Runs           int
}

// MinTolerance is the least tolerance of a figure, however steady its runs.
const MinTolerance = 0.10

// BuildReference makes the reference of the figures with a ratio in runs
// (each run's lines).
func BuildReference(runs [][]Line) []Figure {
	ratios := map[string][]float64{}
	higher := map[string]bool{}
	for _, run := range runs {
		for _, l := range run {
			if r, ok := l.Ratio(); ok {
				ratios[l.Name] = append(ratios[l.Name], r)
				higher[l.Name] = l.HigherIsBetter()
			}
		}
	}
	var out []Figure
	for _, name := range slices.Sorted(maps.Keys(ratios)) {
		rs := ratios[name]
		med := median(rs)
		spread := 0.0
		for _, r := range rs {
			spread = max(spread, math.Abs(r-med)/med)
		}
		out = append(out, Figure{Name: name, Ratio: med, Spread: spread, Tolerance: max(2*spread, MinTolerance),
			HigherIsBetter: higher[name], Runs: len(rs)})
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// FormatReference renders a reference as REF lines, one a figure.
func FormatReference(figs []Figure) string {
	var b strings.Builder
	for _, f := range figs {
		better := "lower"
		if f.HigherIsBetter {
			better = "higher"
		}
		fmt.Fprintf(&b, "REF name=%s ratio=%.3f spread=%.3f tolerance=%.3f better=%s runs=%d\n",
			f.Name, f.Ratio, f.Spread, f.Tolerance, better, f.Runs)
	}
	return b.String()
}

// ParseReference reads the REF lines of r (comments and other lines are
// skipped).
func ParseReference(r io.Reader) ([]Figure, error) {
	var out []Figure
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "REF" {
			continue
		}
		fig := Figure{}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			var err error
			switch k {
			case "name":
				fig.Name = v
			case "ratio":
				fig.Ratio, err = strconv.ParseFloat(v, 64)
			case "spread":
				fig.Spread, err = strconv.ParseFloat(v, 64)
			case "tolerance":
				fig.Tolerance, err = strconv.ParseFloat(v, 64)
			case "better":
				fig.HigherIsBetter = v == "higher"
			case "runs":
				fig.Runs, err = strconv.Atoi(v)
			}
			if err != nil {
				return nil, fmt.Errorf("bench: reference line %q: %s: %w", sc.Text(), k, err)
			}
		}
		if fig.Name == "" || fig.Ratio <= 0 || fig.Tolerance <= 0 {
			return nil, fmt.Errorf("bench: reference line %q: want a name, a ratio and a tolerance", sc.Text())
		}
		out = append(out, fig)
	}
	return out, sc.Err()
}

// Verdict is one figure's comparison with its reference.
type Verdict struct {
	Figure Figure
	Ratio  float64 // this run's (0: the run has no such figure)
	Change float64 // relative change, positive when worse
	Worse  bool    // worse than the reference by more than its tolerance
}

// Check compares the run's ratios with the reference.
func Check(ref []Figure, run []Line) []Verdict {
	got := map[string]float64{}
	for _, l := range run {
		if r, ok := l.Ratio(); ok {
			got[l.Name] = r
		}
	}
	var out []Verdict
	for _, f := range ref {
		v := Verdict{Figure: f, Ratio: got[f.Name]}
		if v.Ratio > 0 {
			v.Change = (v.Ratio - f.Ratio) / f.Ratio
			if f.HigherIsBetter {
				v.Change = -v.Change
			}
			v.Worse = v.Change > f.Tolerance
		}
		out = append(out, v)
	}
	return out
}
