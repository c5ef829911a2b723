package durability_test

import (
	"slices"
	"syscall"
	"testing"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// A hibernated session woken by a delivery into a pool of two supervised
// owner processes that each die at their first claim (crash-after-claim:1:
// SIGKILL right after the claim CAS, before the consumer): the session was
// settled when it was woken, yet each boot that kills its process counts,
// so it is quarantined after exactly QuarantineAfter (3) deaths, with
// error process_died, and no process dies after that.
func TestBootCrashOfHibernatedSessionQuarantined(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.bin = proctest.BuildNoRace(t, "github.com/baton-rt/baton/cmd/owner") // many process starts
	h := c.owner("h")
	id := c.start(protocol.StartRequest{})
	c.send(id, harness.Deliver("hi"))
	c.waitOutput(id, "hi")
	if err := h.Cmd.Process.Signal(syscall.SIGTERM); err != nil { // the drain hibernates it
		t.Fatal(err)
	}
	if code := h.Wait(t, wait); code != 0 {
		t.Fatalf("owner h exited %d after SIGTERM", code)
	}
	if rec := c.record(id); rec.State != record.StateHibernated || rec.BootAttempts != 0 {
		t.Fatalf("before the wake: state %s, bootAttempts %d", rec.State, rec.BootAttempts)
	}

	sup := c.supervise([]string{"--lease-ttl", "2s", "--quarantine-backoff", "200ms,400ms", "--fault", "crash-after-claim:1"}, "a", "b")
	c.send(id, harness.Deliver("wake up"))
	c.wake(id)
	q := c.waitQuarantined(id)
	died := sup.deaths()
	t.Logf("quarantined after %d deaths (attempts %d, error %q, epoch %d)", died, q.Quarantine.Attempts, q.Quarantine.Error, q.Epoch)
	if died != 3 || q.Quarantine.Attempts != 3 || q.BootAttempts != 3 || q.Quarantine.Error != record.ProcessDied {
		t.Fatalf("%d deaths, bootAttempts %d, quarantine %+v; want 3 deaths, 3 attempts, %s", died, q.BootAttempts, q.Quarantine, record.ProcessDied)
	}
	if codes := sup.codes(0); slices.ContainsFunc(codes, func(code int) bool { return code != -1 }) {
		t.Fatalf("exit codes %v, want SIGKILL (-1) only", codes)
	}
	evs := c.waitKind(id, wire.EventSessionQuarantined, 1)
	checkStream(t, evs)
	d := harness.FirstData[wire.SessionQuarantined](t, evs, wire.EventSessionQuarantined)
	if d.Attempts != 3 || d.Error != record.ProcessDied {
		t.Fatalf("session.quarantined %+v", d)
	}
	// Every process refuses it now, and none dies any more.
	c.waitWakeQuarantined(id)
	if n := sup.deaths(); n != died {
		t.Fatalf("a process died after the quarantine (%d deaths, %d before)", n, died)
	}
}
