package stages

import (
	"strings"
	"testing"
	"time"
)

// TestReportMediansPerStage: each stage's median time since the one
// before, over the cycles of the most common order; a cycle that missed a
// stage or repeated one is counted out, not mixed in.
func TestReportMediansPerStage(t *testing.T) {
	clock := time.Unix(0, 0)
	r := newRecorder(func() time.Time { return clock })
	at := func(d time.Duration) { clock = time.Unix(0, 0).Add(d) }
	for i, gaps := range [][2]time.Duration{{10, 5}, {20, 7}, {30, 9}} {
		at(time.Duration(i) * time.Second)
		r.start("s1")
		at(time.Duration(i)*time.Second + gaps[0]*time.Microsecond)
		r.mark("s1", "pulled")
		r.mark("s1", "pulled") // the first time counts
		at(time.Duration(i)*time.Second + (gaps[0]+gaps[1])*time.Microsecond)
		r.mark("s1", "committed")
	}
	r.start("s2") // a cycle that reached one stage only
	r.mark("s2", "pulled")
	r.mark("s3", "pulled") // no cycle started: ignored
	var b strings.Builder
	r.report(&b, "x")
	want := "STAGES x cycles=3 of 4\n" +
		"STAGE pulled           +    20.0 µs  at     20.0 µs\n" +
		"STAGE committed        +     7.0 µs  at     27.0 µs\n"
	if b.String() != want {
		t.Fatalf("report:\n%s\nwant:\n%s", b.String(), want)
	}
	r.reset()
	b.Reset()
	r.report(&b, "y")
	if b.String() != "STAGES y cycles=0 of 0\n" {
		t.Fatalf("after reset: %q", b.String())
	}
}
