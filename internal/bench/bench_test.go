package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestFormatAndRatio(t *testing.T) {
	var buf bytes.Buffer
	r := NewReporter(&buf)
	base := []time.Duration{10 * time.Microsecond, 20 * time.Microsecond, 30 * time.Microsecond}
	r.Latencies("base", base, 0)
	r.Latencies("x", []time.Duration{40 * time.Microsecond, 40 * time.Microsecond, 50 * time.Microsecond}, 0, Baseline("base"), Field("writes", 3))
	r.Throughput("tput", 1000, time.Second)
	r.Throughput("tput2", 500, time.Second, Baseline("tput"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		"BENCH name=base n=3 p50_us=20.0 p99_us=20.0 max_us=30.0",
		"BENCH name=x n=3 p50_us=40.0 p99_us=40.0 max_us=50.0 baseline=base ratio=2.000 writes=3",
		"BENCH name=tput n=1000 p50_us=0.0 p99_us=0.0 ops_per_s=1000",
		"BENCH name=tput2 n=500 p50_us=0.0 p99_us=0.0 ops_per_s=500 baseline=tput ratio=0.500",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines: %q", len(lines), lines)
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, lines[i], want[i])
		}
	}
}
