package durability_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/wire"
)

// The embedded nats-server restarts (same store, same port) while two
// owner processes run sessions under steady traffic, with steps and commits
// in flight: (a) at once, (b) after an outage longer than the lease, so
// every process fences itself and every lease expires. Every command the
// server acknowledged is applied exactly once and in order, every committed
// event is in the stream once (seq contiguous), writes whose replies were
// lost are settled, and every session still has a running owner that
// answers.
func TestNATSRestart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		down time.Duration
	}{{"immediate", 0}, {"outage past the lease", leaseTTL + time.Second}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testNATSRestart(t, tc.down)
		})
	}
}

func testNATSRestart(t *testing.T, down time.Duration) {
	c := newCluster(t)
	a, b := c.owner("a"), c.owner("b")
	n, total := testsize.Pick(4, 16), testsize.Pick(48, 400)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = c.start(protocol.StartRequest{})
	}

	var mu sync.Mutex
	accepted := map[string][]string{} // session → command IDs in stream order
	texts := map[string]string{}      // command ID → text
	restartAt := total / 3
	restarted := make(chan struct{})
	for i := range total {
		if i == restartAt {
			go func() {
				defer close(restarted)
				c.restartServer(down)
				t.Logf("nats-server restarted after %v down", down)
			}()
		}
		sid, cid := ids[i%n], fmt.Sprintf("m%d", i)
		text := cid
		if i%4 == 1 {
			text = "/sleep 150ms" // a two-step turn: commits in flight
		}
		// Retry with the same message ID until acknowledged: a publish
		// whose ack was lost is deduplicated by the stream.
		deadline := time.Now().Add(wait)
		for {
			_, err := c.trySend(sid, harness.WithID(cid, harness.Deliver(text)))
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("command %s never acknowledged: %v", cid, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		mu.Lock()
		accepted[sid] = append(accepted[sid], cid)
		texts[cid] = text
		mu.Unlock()
		time.Sleep(15 * time.Millisecond)
	}
	<-restarted

	for _, sid := range ids {
		want := accepted[sid]
		evs := c.waitFor(sid, fmt.Sprintf("%d commands applied", len(want)), func(evs []wire.Event) bool {
			return harness.Count(evs, wire.EventCommandApplied) >= len(want) && harness.Count(evs, wire.EventSessionWaiting) >= len(want)
		})
		if applied := checkStream(t, evs); !slices.Equal(applied, want) {
			t.Fatalf("session %s applied %v, want %v", sid, applied, want)
		}
		var wantOut []string
		for _, cid := range want {
			wantOut = append(wantOut, texts[cid])
		}
		if got := harness.Outputs(evs); !slices.Equal(got, wantOut) {
			t.Fatalf("session %s outputs %q, want %q", sid, got, wantOut)
		}
		checkReruns(c, sid, evs)
	}

	// Every session still has a running owner, which answers.
	for _, sid := range ids {
		c.send(sid, harness.WithID("final-"+sid, harness.Deliver("final")))
	}
	for _, sid := range ids {
		evs := c.waitOutput(sid, "final")
		checkStream(t, evs)
		if rec := c.record(sid); rec.OwnerProcess != "a" && rec.OwnerProcess != "b" {
			t.Fatalf("session %s owned by %q", sid, rec.OwnerProcess)
		}
	}
	for _, p := range []string{"a", "b"} {
		proc := map[string]int{"a": 0, "b": 1}[p]
		out := []string{a.Output(), b.Output()}[proc]
		t.Logf("%s: %d uncertain commits settled, %d consumers recreated, %d fences",
			p, strings.Count(out, "commit outcome uncertain"), strings.Count(out, "inbox consumer recreated"), strings.Count(out, "fenced: stopping every session"))
	}
}

// checkReruns: every committed step ran once, or again only after its
// earlier run was stopped before its commit landed — a fence or a stopped
// session that the earlier run's own process logged between the two runs
// (a restart that outlasts the fence margin fences every owner).
func checkReruns(c *cluster, sid string, evs []wire.Event) {
	c.t.Helper()
	reran, err := harness.CheckStepRuns(c.execs(), sid, evs, c.procs.OwnerStops())
	c.h.Check(err)
	if len(reran) > 0 {
		c.t.Logf("session %s: steps %v ran again after a stop of their first run", sid, reran)
	}
}
