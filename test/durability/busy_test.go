package durability_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// debounced is a debounce-mode delivery of text with a window of ms.
func debounced(id, text string, ms int64) wire.Command {
	c := harness.WithID(id, harness.Deliver(text))
	c.Deliver.Mode, c.Deliver.DebounceMs = wire.ModeDebounce, ms
	return c
}

// TestKillInsideDebounceWindow: an owner process SIGKILLed while a
// debounce window is open (its three deliveries applied into the window,
// its timer armed) loses nothing: the peer that takes the session over
// re-arms the window's timer, and the three deliveries start one turn.
func TestKillInsideDebounceWindow(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	a := c.owner("a")
	id := c.start(protocol.StartRequest{})
	c.send(id, harness.WithID("warm", harness.Deliver("warm up")))
	c.waitOutput(id, "warm up")
	c.owner("b")
	for i, text := range []string{"one", "two", "three"} {
		if i > 0 {
			time.Sleep(300 * time.Millisecond)
		}
		c.send(id, debounced(fmt.Sprintf("d%d", i), text, 4000))
	}
	c.waitRecord(id, "the window holding the three deliveries", func(r record.SessionRecord) bool {
		cp, err := wire.DecodeCheckpoint(r.Checkpoint)
		return err == nil && cp.Debounce != nil && len(cp.Debounce.Inputs) == 3
	})
	c.kill(a)
	c.waitOwner(id, "b")
	c.waitFor(id, "the window's turn", func(evs []wire.Event) bool { return slices.Contains(harness.Outputs(evs), "three") })
	time.Sleep(500 * time.Millisecond) // a second turn would be on the stream by now
	evs := c.events(id)
	if n := harness.Count(evs, wire.EventTurnStarted); n != 2 {
		t.Fatalf("%d turns, want the warm-up's and one for the window: %v", n, harness.Kinds(evs))
	}
	if got := harness.Outputs(evs); !slices.Equal(got, []string{"warm up", "one", "two", "three"}) {
		t.Fatalf("outputs %q, want every debounced delivery once, in one turn", got)
	}
	applied := slices.DeleteFunc(checkStream(t, evs), func(id string) bool { return strings.HasPrefix(id, "timeout-") })
	if !slices.Equal(applied, []string{"warm", "d0", "d1", "d2"}) {
		t.Fatalf("applied %v (the window's timeout aside), want each delivery once, in order", applied)
	}
}

// withMode is a delivery of text in mode (its caller "u").
func withMode(id, text, mode string) wire.Command {
	c := harness.WithID(id, harness.Deliver(text))
	c.Deliver.Mode, c.Caller = mode, "u"
	return c
}

// TestBusyModesUnderKills: traffic in every busy mode while owner
// processes are SIGKILLed — inside a debounce window and during an
// interrupt, alternately. Every command ends with exactly one terminal
// outcome (command.applied, command.rejected or command.superseded), no
// command is applied twice and each stream stays contiguous. make test
// runs one round on two sessions; make soak six rounds on six.
func TestBusyModesUnderKills(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	procs := []*proctest.Proc{c.owner("a"), c.owner("b")}
	sessions := make([]string, testsize.Pick(2, 6))
	for i := range sessions {
		sessions[i] = c.start(protocol.StartRequest{})
	}
	var sent []string // every command ID sent
	send := func(id string, cmd wire.Command) {
		c.send(id, cmd)
		sent = append(sent, id+"/"+cmd.ID)
	}
	rounds := testsize.Pick(1, 6)
	for r := range rounds {
		for i, id := range sessions {
			p := fmt.Sprintf("r%ds%d-", r, i)
			send(id, withMode(p+"sleep", "/sleep 3s", "queue"))
			send(id, withMode(p+"latest1", p+"latest 1", wire.ModeLatest))
			send(id, withMode(p+"latest2", p+"latest 2", wire.ModeLatest))
			send(id, withMode(p+"reject", p+"busy?", wire.ModeReject))
			send(id, withMode(p+"steer", p+"steer", wire.ModeSteer))
		}
		for i, id := range sessions {
			p := fmt.Sprintf("r%ds%d-", r, i)
			c.waitFor(id, "round "+p+" settled", func(evs []wire.Event) bool { return slices.Contains(harness.Outputs(evs), p+"latest 2") })
			if r%2 == 0 {
				send(id, withMode(p+"long", "/sleep 20s", "queue"))
				c.waitFor(id, p+"long running", turnStarted(p+"long"))
				send(id, withMode(p+"interrupt", p+"last", wire.ModeInterrupt))
			} else {
				send(id, debounced(p+"d1", p+"window", 3000))
				send(id, debounced(p+"d2", p+"last", 3000))
			}
		}
		// The kill: while the interrupts (even rounds) or the windows (odd
		// rounds) are in flight; a fresh process replaces the dead one.
		victim := r % len(procs)
		c.kill(procs[victim])
		procs[victim] = c.owner(fmt.Sprintf("p%d", r))
		for i, id := range sessions {
			last := fmt.Sprintf("r%ds%d-last", r, i)
			c.waitFor(id, "the round's last output "+last, func(evs []wire.Event) bool { return slices.Contains(harness.Outputs(evs), last) })
		}
	}
	for _, id := range sessions {
		evs := c.waitFor(id, "every command's outcome", func(evs []wire.Event) bool {
			out := harness.TerminalOutcomes(evs)
			for _, s := range sent {
				if sid, cid, _ := strings.Cut(s, "/"); sid == id && len(out[cid]) == 0 {
					return false
				}
			}
			return true
		})
		checkStream(t, evs)
		for cid, kinds := range harness.TerminalOutcomes(evs) {
			if len(kinds) != 1 {
				t.Fatalf("session %s: command %s ended with %v, want exactly one terminal outcome", id, cid, kinds)
			}
		}
	}
	t.Logf("%d rounds on %d sessions, %d commands, %d kills: every command ended exactly once", rounds, len(sessions), len(sent), rounds)
}

// turnStarted holds once a turn started with command id.
func turnStarted(id string) func([]wire.Event) bool {
	return func(evs []wire.Event) bool {
		all, _ := harness.All[wire.TurnStarted](evs, wire.EventTurnStarted)
		for _, ts := range all {
			if ts.CommandID == id {
				return true
			}
		}
		return false
	}
}
