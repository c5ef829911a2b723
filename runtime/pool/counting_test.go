package pool

import (
	"errors"
	"github.com/baton-rt/baton/internal/failpoint"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// selfFences is how often the self-fence tests fence a session: more than
// QuarantineAfter (2), so counting the fences would quarantine it; each
// fence waits out a lease (~3.5 s).
var selfFences = testsize.Pick(3, 5)

// A healthy session fenced mid-step three times (five under make soak; its
// process holds back its lease renewals until it fences itself, then
// renews again): each time the process lived, and resuming its own session
// it counts nothing — never quarantined (QuarantineAfter 2), bootAttempts
// 0 at every re-run; the step re-runs once per fence, and its delivery is
// applied once.
func TestSelfFencesNotCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var frozen atomic.Bool
	p1 := e.owner("v1", "p1", quarantining(2, 50*time.Millisecond), func(c *Config) {
		c.LeaseTTL = 3 * time.Second
		c.Failpoints = failpoint.New().On(failpoint.HoldLeaseRenewal, failpoint.If(frozen.Load))
	})
	id := e.Start("v1").SessionID
	cmd := harness.Deliver("/sleep 5s")
	cmd.ID = "the-step"
	e.Send(id, cmd)
	fences := selfFences
	for n := 1; n <= fences; n++ {
		e.Eventually(wait, "run "+string(rune('0'+n))+" of the step", func() bool { return len(firstStepRuns(e, id)) == n })
		if cur, _ := e.session(id); cur.Record.BootAttempts != 0 || cur.Record.Quarantined() {
			t.Fatalf("run %d: bootAttempts %d, state %s", n, cur.Record.BootAttempts, cur.Record.State)
		}
		before := p1.Stats().Fences
		frozen.Store(true)
		e.Eventually(wait, "the process fenced", func() bool { return p1.Stats().Fences > before })
		frozen.Store(false)
	}
	evs := e.WaitKind(id, wire.EventTurnCompleted, 1)
	e.CheckStream(evs)
	checkSurvived(t, e, id, evs, cmd.ID, fences)
}

// The same across a pool of two: each time the process running the
// step is frozen past its lease (no renewal, no new lease: the server
// expires it), it fences itself and releases the record of its stopped
// run — evidence that the run ended while its process lived — and the
// peer that takes its lease over claims the session without counting.
// Three fences (five under make soak), each adopted by the other process:
// never quarantined (QuarantineAfter 2), bootAttempts 0 at every re-run,
// the delivery applied once.
func TestSelfFencesAdoptedNotCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	frozen := map[string]*atomic.Bool{"p1": {}, "p2": {}}
	start := func(pid string) *owner {
		return e.owner("v1", pid, quarantining(2, 50*time.Millisecond), func(c *Config) {
			c.LeaseTTL = 3 * time.Second
			c.Failpoints = failpoint.New().On(failpoint.HoldLeaseRenewal, failpoint.If(frozen[pid].Load))
		})
	}
	owners := map[string]*owner{"p1": start("p1")}
	id := e.Start("v1").SessionID
	owners["p2"] = start("p2")
	cmd := harness.Deliver("/sleep 6s")
	cmd.ID = "the-step"
	e.Send(id, cmd)
	fences := selfFences
	for n := 1; n <= fences; n++ {
		var runs []string
		e.Eventually(wait, "run "+string(rune('0'+n))+" of the step", func() bool { runs = firstStepRuns(e, id); return len(runs) == n })
		holder := strings.TrimPrefix(runs[n-1], "t1/1 ")
		cur, _ := e.session(id)
		if cur.Record.BootAttempts != 0 || cur.Record.Quarantined() || cur.Record.OwnerProcess != holder {
			t.Fatalf("run %d on %s: bootAttempts %d, state %s, owner %q", n, holder, cur.Record.BootAttempts, cur.Record.State, cur.Record.OwnerProcess)
		}
		before := owners[holder].Stats().Fences
		frozen[holder].Store(true)
		e.Eventually(wait, holder+" fenced and its session adopted", func() bool {
			cur, _ := e.session(id)
			return owners[holder].Stats().Fences > before && cur.Record.OwnerProcess != holder && cur.Record.OwnerProcess != ""
		})
		frozen[holder].Store(false)
	}
	evs := e.WaitKind(id, wire.EventTurnCompleted, 1)
	e.CheckStream(evs)
	checkSurvived(t, e, id, evs, cmd.ID, fences)
}

// Runs that stop before their first commit in a process that lives (the
// run fails right after creating its consumer, three times) leave the
// claim's mark, but the process that restarts them saw each one stop:
// none is counted (QuarantineAfter 2), and the fourth run serves.
func TestFailedRunsOfALivingProcessNotCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.owner("v1", "p1")
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("hi"))
	e.WaitOutput(id, "hi")
	_ = first.Stop()
	var failed atomic.Int32
	p1 := e.owner("v1", "p1", quarantining(2, 50*time.Millisecond), func(c *Config) {
		c.Failpoints = failpoint.New().On(failpoint.AfterConsumer, func(a failpoint.Args) error {
			if a.SessionID == id && failed.Add(1) <= 3 {
				return errors.New("injected: the run fails before its boot")
			}
			return nil
		})
	})
	e.Send(id, harness.Deliver("again"))
	e.WaitOutput(id, "again")
	cur, _ := e.session(id)
	if n := failed.Load(); n != 4 || cur.Record.BootAttempts != 0 || cur.Record.Quarantined() || cur.Record.OwnerProcess != "p1" {
		t.Fatalf("%d runs; bootAttempts %d, state %s, owner %q", n, cur.Record.BootAttempts, cur.Record.State, cur.Record.OwnerProcess)
	}
	if !p1.IsLoaded(id) {
		t.Fatal("the session does not run on p1")
	}
}

// checkSurvived checks a session after fences that were no deaths: never
// quarantined, no attempt counted, its first step run once and once again
// per fence, command cmdID applied once.
func checkSurvived(t *testing.T, e *env, id string, evs []wire.Event, cmdID string, fences int) {
	t.Helper()
	cur, _ := e.session(id)
	if cur.Record.Quarantined() || cur.Record.BootAttempts != 0 || harness.Count(evs, wire.EventSessionQuarantined) != 0 {
		t.Fatalf("after %d fences: state %s, bootAttempts %d", fences, cur.Record.State, cur.Record.BootAttempts)
	}
	if runs := firstStepRuns(e, id); len(runs) != fences+1 {
		t.Fatalf("the step ran %v, want %d times (once, and once again per fence)", e.stepRuns(id), fences+1)
	}
	all, err := harness.Applied(evs)
	e.Check(err)
	applied := 0
	for _, a := range all {
		if a.CommandID == cmdID {
			applied++
		}
	}
	if applied != 1 {
		t.Fatalf("command %s applied %d times", cmdID, applied)
	}
}

// firstStepRuns are the runs of the session's first step (t1/1).
func firstStepRuns(e *env, id string) []string {
	var out []string
	for _, r := range e.stepRuns(id) {
		if strings.HasPrefix(r, "t1/1 ") {
			out = append(out, r)
		}
	}
	return out
}

// A session whose own commit the store refuses — its record would exceed
// what the sessions bucket accepts — is not reported as a dead process:
// each run records the refusal (record.Refused), and the claim that
// reaches QuarantineAfter parks it with the refusal as its error. The
// process never died; the step ran once per attempt.
func TestRefusedCommitQuarantined(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p1 := e.owner("v1", "p1", quarantining(2, 50*time.Millisecond))
	id := e.Start("v1").SessionID
	e.Send(id, harness.Deliver("hi"))
	e.WaitOutput(id, "hi")
	e.limitRecords(16 << 10)
	e.Send(id, harness.Deliver("/bigstate 40000")) // kept inline: a commit of ~40 KB

	q := e.waitQuarantined(id)
	qi := q.Record.Quarantine
	if qi.Attempts != 2 || !strings.HasPrefix(qi.Error, record.CommitTooLarge+": ") || !strings.Contains(qi.Error, "maximum") {
		t.Fatalf("quarantine %+v, want 2 attempts and a %s error", qi, record.CommitTooLarge)
	}
	evs := e.WaitKind(id, wire.EventSessionQuarantined, 1)
	e.CheckStream(evs)
	if d := harness.FirstData[wire.SessionQuarantined](t, evs, wire.EventSessionQuarantined); d.Error != qi.Error || d.Attempts != 2 {
		t.Fatalf("session.quarantined %+v", d)
	}
	if runs := e.stepRuns(id); len(runs) != 3 { // "hi", then the refused step twice
		t.Fatalf("steps ran %v", runs)
	}
	select {
	case <-p1.Done():
		t.Fatalf("the process stopped: %v", p1.Err())
	default:
	}
	notRunning(t, e, id, q, p1)
}

// limitRecords lowers what the sessions bucket's stream accepts to max
// bytes per message, as a server configured so would refuse a larger
// record (the owners read the limit when they start, so only the server
// refuses).
func (e *env) limitRecords(max int32) {
	e.t.Helper()
	ctx := e.t.Context()
	s, err := e.JS.Stream(ctx, "KV_"+e.Names.SessionsBucket())
	e.Check(err)
	cfg := s.CachedInfo().Config
	cfg.MaxMsgSize = max
	_, err = e.JS.UpdateStream(ctx, cfg)
	e.Check(err)
}
