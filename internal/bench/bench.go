package bench

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Result is one figure.
type Result struct {
	Name     string
	N        int
	P50      time.Duration
	P99      time.Duration
	Max      time.Duration
	OpsPerS  float64 // 0 for a pure latency figure
	Baseline string
	Ratio    float64
	Extra    []string // "key=value" fields, printed last
}

// Option adds to a Result before it is printed.
type Option func(*Result)

// Baseline names the figure this one is compared with.
func Baseline(name string) Option { return func(r *Result) { r.Baseline = name } }

// Field adds a key=value field.
func Field(key string, value any) Option {
	return func(r *Result) { r.Extra = append(r.Extra, fmt.Sprintf("%s=%v", key, value)) }
}

// Reporter prints figures and remembers them as baselines.
type Reporter struct {
	mu   sync.Mutex
	w    io.Writer
	seen map[string]Result
}

// NewReporter prints to w.
func NewReporter(w io.Writer) *Reporter {
	return &Reporter{w: w, seen: map[string]Result{}}
}

// Latencies summarises samples (one per operation) as a latency figure. If
// elapsed > 0 it also prints ops_per_s = len(samples)/elapsed.
func (r *Reporter) Latencies(name string, samples []time.Duration, elapsed time.Duration, opts ...Option) Result {
	res := Summarize(name, samples)
	if elapsed > 0 {
		res.OpsPerS = float64(len(samples)) / elapsed.Seconds()
	}
	return r.emit(res, opts)
}

// Throughput prints a throughput figure: n operations in elapsed.
func (r *Reporter) Throughput(name string, n int, elapsed time.Duration, opts ...Option) Result {
	res := Result{Name: name, N: n, OpsPerS: float64(n) / elapsed.Seconds()}
	return r.emit(res, opts)
}

func (r *Reporter) emit(res Result, opts []Option) Result {
	for _, o := range opts {
		o(&res)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if base, ok := r.seen[res.Baseline]; ok {
		res.Ratio = ratio(res, base)
	}
	r.seen[res.Name] = res
	fmt.Fprintln(r.w, Format(res))
	return res
}

func ratio(res, base Result) float64 {
	if res.P50 > 0 && base.P50 > 0 {
		return float64(res.P50) / float64(base.P50)
	}
	if res.OpsPerS > 0 && base.OpsPerS > 0 {
		return res.OpsPerS / base.OpsPerS
	}
	return 0
}

// Summarize computes n, p50, p99 and max of samples.
func Summarize(name string, samples []time.Duration) Result {
	s := slices.Clone(samples)
	slices.Sort(s)
	res := Result{Name: name, N: len(s)}
	if len(s) == 0 {
		return res
	}
	res.P50 = s[(len(s)-1)*50/100]
	res.P99 = s[(len(s)-1)*99/100]
	res.Max = s[len(s)-1]
	return res
}

// Format renders a Result as one BENCH line.
func Format(r Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "BENCH name=%s n=%d p50_us=%s p99_us=%s", r.Name, r.N, us(r.P50), us(r.P99))
	if r.Max > 0 {
		fmt.Fprintf(&b, " max_us=%s", us(r.Max))
	}
	if r.OpsPerS > 0 {
		fmt.Fprintf(&b, " ops_per_s=%.0f", r.OpsPerS)
	}
	if r.Baseline != "" {
		fmt.Fprintf(&b, " baseline=%s ratio=%.3f", r.Baseline, r.Ratio)
	}
	for _, e := range r.Extra {
		b.WriteString(" " + e)
	}
	return b.String()
}

func us(d time.Duration) string {
	return fmt.Sprintf("%.1f", float64(d)/float64(time.Microsecond))
}
