package harness

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// stopTB records a Fatalf and ends the goroutine that called it, as
// testing.T does; the rest of TB comes from the real test.
type stopTB struct {
	*testing.T
	fatal string
}

func (s *stopTB) Fatalf(format string, args ...any) {
	s.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (s *stopTB) Context() context.Context { return s.T.Context() }

// run calls f with a harness over s in its own goroutine and reports
// what it failed with ("" if it returned).
func (s *stopTB) run(f func(T)) string {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(For(s))
	}()
	<-done
	return s.fatal
}

// Progressing waits for as long as progress advances, and fails once it
// stands still for the stall bound, however close to the target.
func TestProgressing(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	tb := &stopTB{T: t}
	// 15 steps of 100 ms: 1.5 s in all, more than the stall bound.
	go func() {
		for range 15 {
			time.Sleep(100 * time.Millisecond)
			n.Add(1)
		}
	}()
	if f := tb.run(func(h T) {
		h.Progressing(time.Second, "steady", 15, func() int { return int(n.Load()) })
	}); f != "" {
		t.Fatalf("a chain that kept advancing failed: %s", f)
	}
	var m atomic.Int64
	go func() {
		for range 5 {
			time.Sleep(10 * time.Millisecond)
			m.Add(1)
		}
	}()
	if f := (&stopTB{T: t}).run(func(h T) {
		h.Progressing(time.Second, "stalled", 6, func() int { return int(m.Load()) })
	}); f == "" {
		t.Fatal("a chain that stopped one short of its target passed")
	}
}
