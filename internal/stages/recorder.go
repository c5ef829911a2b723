package stages

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
)

// recorder holds the cycles of a run: the functions of on.go drive one.
type recorder struct {
	mu     sync.Mutex
	now    func() time.Time
	open   map[string]*cycle
	closed [][]mark
}

type mark struct {
	stage string
	at    time.Duration // since the cycle's start
}

type cycle struct {
	start time.Time
	marks []mark
}

func newRecorder(now func() time.Time) *recorder {
	return &recorder{now: now, open: map[string]*cycle{}}
}

func (r *recorder) start(key string) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.open[key]; c != nil {
		r.closed = append(r.closed, c.marks)
	}
	r.open[key] = &cycle{start: now}
}

func (r *recorder) mark(key, stage string) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.open[key]
	if c == nil || slices.ContainsFunc(c.marks, func(m mark) bool { return m.stage == stage }) {
		return
	}
	c.marks = append(c.marks, mark{stage, now.Sub(c.start)})
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open, r.closed = map[string]*cycle{}, nil
}

// report prints, for the stage order of the most common cycle, each
// stage's median time since the stage before and since the start, over
// the cycles that reached exactly those stages in that order.
func (r *recorder) report(w io.Writer, title string) {
	r.mu.Lock()
	all := slices.Clone(r.closed)
	for _, c := range r.open {
		all = append(all, c.marks)
	}
	r.mu.Unlock()
	order := commonOrder(all)
	since := make([][]time.Duration, len(order))
	delta := make([][]time.Duration, len(order))
	n := 0
	for _, ms := range all {
		if !sameOrder(ms, order) {
			continue
		}
		n++
		prev := time.Duration(0)
		for i, m := range ms {
			since[i] = append(since[i], m.at)
			delta[i] = append(delta[i], m.at-prev)
			prev = m.at
		}
	}
	fmt.Fprintf(w, "STAGES %s cycles=%d of %d\n", title, n, len(all))
	for i, s := range order {
		fmt.Fprintf(w, "STAGE %-16s +%8.1f µs  at %8.1f µs\n", s, median(delta[i]), median(since[i]))
	}
}

// commonOrder is the most common sequence of stages among the cycles (the
// first one seen wins a tie).
func commonOrder(all [][]mark) []string {
	count := map[string]int{}
	var best []string
	bestN := 0
	for _, ms := range all {
		names := make([]string, len(ms))
		for i, m := range ms {
			names[i] = m.stage
		}
		k := fmt.Sprint(names)
		if count[k]++; count[k] > bestN {
			best, bestN = names, count[k]
		}
	}
	return best
}

func sameOrder(ms []mark, order []string) bool {
	return slices.EqualFunc(ms, order, func(m mark, s string) bool { return m.stage == s })
}

// median in microseconds (0 for none).
func median(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[len(ds)/2]) / float64(time.Microsecond)
}
