package main

import (
	"math"
	"testing"
)

// TestTally: each sample counts for the innermost frame with an owner; a
// stack with none is the Go runtime's.
func TestTally(t *testing.T) {
	out := []byte(`File: bench
Type: cpu
Duration: 2s, Total samples = 60ms (3.00%)
-----------+-------------------------------------------------------
      20ms   runtime.memmove
             encoding/json.(*encodeState).marshal
             github.com/baton-rt/baton/runtime/session.(*Session).record
             github.com/nats-io/nats-server/v2/server.(*client).readLoop
-----------+-------------------------------------------------------
      10ms   github.com/nats-io/nats-server/v2/server.(*stream).purge
-----------+-------------------------------------------------------
   30000us   runtime.futex
             runtime.schedule
-----------+-------------------------------------------------------
      5ms   runtime.scanobject
             runtime.gcDrain
             runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
      1ms   github.com/baton-rt/baton/runtime.(*Machine).Handle
-----------+-------------------------------------------------------
      4ms   slices.Clone[go.shape.[]github.com/baton-rt/baton/runtime.Entry,go.shape.struct { Content []github.com/baton-rt/baton/wire.Part }] (inline)
             github.com/baton-rt/baton/runtime.(*Machine).runNext
-----------+-------------------------------------------------------
`)
	got, total := tally(out)
	want := map[string]float64{
		"baton runtime/session": 0.020, "nats-server (embedded)": 0.010,
		"Go runtime: scheduler, syscalls, other": 0.030, "Go GC (background)": 0.005, "baton runtime": 0.005,
	}
	if len(got) != len(want) || math.Abs(total-0.070) > 1e-9 {
		t.Fatalf("got %v total %v", got, total)
	}
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-9 {
			t.Fatalf("%s: %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}
