package pool

import (
	"context"
	"errors"
	"fmt"
	"github.com/baton-rt/baton/internal/failpoint"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// The driver-level handoff fault matrix: every step of the
// handoff transaction (docs/handoff.md, "Crash points") × {crash of the
// source owner, crash of the candidate owner, a stall past the timeout, a
// new command arriving, the source cut off and coming back late}, with real
// owners on an embedded server. Faults are injected at the named steps
// (the failpoints HandoffSource*, HandoffCandidate*, AfterConsumer), never by
// sleeping for a race.
//
// A crash closes the owner's NATS connection and cancels its Run at the
// hook (nothing more is written, its lease is not released and expires);
// the process is then restarted with the same process ID, as cmd/owner
// after a SIGKILL. A stall blocks the party at the hook: the source freezes
// past its lease (renewals held: it fences itself), the candidate past the
// source's start timeout. A late source is frozen at its hook until its
// lease expired and a peer of its deployment adopted the session (or the
// candidate owns it), then released: it must neither commit nor pull.
//
// Every scenario ends with: the record active and run by exactly one live
// owner, the one it names; every accepted command applied once and in
// stream order (the trigger included); no agent step executed twice; the
// event stream contiguous without duplicates; no record write by a run
// after a later epoch was written (a late commit); no marker left; and the
// session answers a later delivery.

// Matrix timing: short leases so a crash is recovered in about two seconds.
const (
	mxLeaseTTL     = 2 * time.Second
	mxLeaseRenew   = 300 * time.Millisecond
	mxStartTimeout = 2 * time.Second
	// mxStall is longer than the lease TTL and the start timeout.
	mxStall = 3 * time.Second
)

type mxSide string

const (
	onSource    mxSide = "source"
	onCandidate mxSide = "candidate"
	onDriver    mxSide = "driver" // the candidate's new run, after its consumer exists
)

// mxPoint is a crash point: a hook of one side before or after a step.
type mxPoint struct {
	side  mxSide
	after bool
	step  handoff.Step
}

func (p mxPoint) String() string {
	when := "before"
	if p.after {
		when = "after"
	}
	return fmt.Sprintf("%s-%s-%s", p.side, when, p.step)
}

// stepConsumer names the driver's point: the candidate's run created its
// consumer and has not booted yet.
const stepConsumer handoff.Step = "consumer"

// mxPoints lists every step of both sides in the order of a handoff
// (reclaim only on the failure path: its scenarios have a candidate that
// refuses the checkpoint).
func mxPoints() []mxPoint {
	return []mxPoint{
		{onSource, true, handoff.StepStage},
		{onSource, true, handoff.StepMark},
		{onSource, false, handoff.StepCheckBacklog},
		{onSource, true, handoff.StepCheckBacklog},
		{onSource, true, handoff.StepStart},
		{onSource, false, handoff.StepConfirm},
		{onSource, true, handoff.StepConfirm},
		{onSource, true, handoff.StepReclaim},
		{onSource, true, handoff.StepCleanup},
		{onCandidate, true, handoff.StepLoad},
		{onCandidate, true, handoff.StepVerify},
		{onCandidate, true, handoff.StepValidate},
		{onCandidate, true, handoff.StepActivate},
		{onCandidate, true, handoff.StepUnmark},
		{onDriver, true, stepConsumer},
	}
}

type mxFault string

const (
	fCrashSource    mxFault = "crash-source"
	fCrashCandidate mxFault = "crash-candidate"
	fStall          mxFault = "stall"
	fCommand        mxFault = "command"
	fLate           mxFault = "late-source"
)

var mxFaults = []mxFault{fCrashSource, fCrashCandidate, fStall, fCommand, fLate}

// mxNormal is the covering subset `make test` runs: every point and every
// fault at least once, the classic combinations first. BATON_SOAK=1 runs
// the full product.
func mxNormal() []mxCase {
	p := func(side mxSide, after bool, step handoff.Step, f mxFault) mxCase {
		return mxCase{mxPoint{side, after, step}, f}
	}
	return []mxCase{
		p(onSource, true, handoff.StepStage, fCommand), // found by the backlog check: queued
		p(onSource, true, handoff.StepMark, fCrashSource),
		p(onSource, false, handoff.StepCheckBacklog, fLate),
		p(onSource, true, handoff.StepCheckBacklog, fCommand), // after the check: after the trigger, on v2
		p(onSource, true, handoff.StepStart, fCrashCandidate),
		p(onSource, false, handoff.StepConfirm, fLate),
		p(onSource, true, handoff.StepConfirm, fCrashSource),
		p(onSource, true, handoff.StepReclaim, fStall),
		p(onSource, true, handoff.StepCleanup, fCrashCandidate),
		p(onCandidate, true, handoff.StepLoad, fStall), // the source reclaims; the candidate resumes and is fenced
		p(onCandidate, true, handoff.StepVerify, fCrashCandidate),
		p(onCandidate, true, handoff.StepValidate, fCrashSource),
		p(onCandidate, true, handoff.StepActivate, fStall), // activated; the source's start times out
		p(onCandidate, true, handoff.StepActivate, fCrashCandidate),
		p(onCandidate, true, handoff.StepUnmark, fLate),
		p(onDriver, true, stepConsumer, fCommand),
	}
}

type mxCase struct {
	point mxPoint
	fault mxFault
}

func (c mxCase) String() string { return c.point.String() + "/" + string(c.fault) }

func TestHandoffFaultMatrix(t *testing.T) {
	t.Parallel()
	cases := mxNormal()
	if testsize.Pick(0, 1) == 1 {
		cases = nil
		for _, p := range mxPoints() {
			for _, f := range mxFaults {
				cases = append(cases, mxCase{p, f})
			}
		}
	}
	// The normal subset must cover every point and every fault.
	points, faults := map[mxPoint]bool{}, map[mxFault]bool{}
	for _, c := range cases {
		points[c.point], faults[c.fault] = true, true
	}
	for _, p := range mxPoints() {
		if !points[p] {
			t.Fatalf("point %s not covered", p)
		}
	}
	for _, f := range mxFaults {
		if !faults[f] {
			t.Fatalf("fault %s not covered", f)
		}
	}
	for _, c := range cases {
		t.Run(c.String(), func(t *testing.T) {
			t.Parallel()
			newMxScenario(t, c).run()
		})
	}
}

var errCrash = errors.New("matrix: crashed here")

// mxInst is one owner process instance of a scenario with its fault state.
type mxInst struct {
	sc      *mxScenario
	pid     string
	dep     string
	w       *owner
	crashed atomic.Bool
	frozen  atomic.Bool           // lease renewals held
	cutoff  atomic.Pointer[mxCut] // a source hook that blocks (a late source)
}

// mxCut freezes the source at its next source hook (at == nil) or at the
// hook at, until free is closed.
type mxCut struct {
	at   *mxPoint
	free chan struct{}
}

type mxScenario struct {
	t     *testing.T
	e     *env
	c     mxCase
	id    string
	fired atomic.Bool
	acted chan struct{} // closed when the fault's action at the point returned
	hit   chan mxHit    // the point was reached
	cut   chan struct{} // a late source is frozen at its hook
	free  chan struct{} // releases a late source

	mu    sync.Mutex
	insts []*mxInst
	errs  []string // errors seen in hooks (reported by the test goroutine)
}

type mxHit struct {
	crashed *mxInst // the instance the fault crashed, if any
}

func newMxScenario(t *testing.T, c mxCase) *mxScenario {
	return &mxScenario{t: t, c: c, acted: make(chan struct{}), hit: make(chan mxHit, 1),
		cut: make(chan struct{}), free: make(chan struct{})}
}

// refuses: a reclaim happens only when the start fails before activation.
func (sc *mxScenario) refuses() bool { return sc.c.point.step == handoff.StepReclaim }

func (sc *mxScenario) errorf(format string, args ...any) {
	sc.mu.Lock()
	sc.errs = append(sc.errs, fmt.Sprintf(format, args...))
	sc.mu.Unlock()
}

// start runs an owner process instance with the scenario's fault hooks.
func (sc *mxScenario) start(dep, pid string) *mxInst {
	in := &mxInst{sc: sc, pid: pid, dep: dep}
	step := func(a failpoint.Args) handoff.Step { return handoff.Step(a.Detail) }
	f := failpoint.New().
		On(failpoint.HandoffSourceBefore, func(a failpoint.Args) error { return in.at(mxPoint{onSource, false, step(a)}) }).
		On(failpoint.HandoffSourceAfter, func(a failpoint.Args) error { return in.at(mxPoint{onSource, true, step(a)}) }).
		On(failpoint.HandoffCandidateBefore, func(a failpoint.Args) error { return in.at(mxPoint{onCandidate, false, step(a)}) }).
		On(failpoint.HandoffCandidateAfter, func(a failpoint.Args) error { return in.at(mxPoint{onCandidate, true, step(a)}) }).
		On(failpoint.AfterConsumer, func(a failpoint.Args) error { return in.atConsumer(runtime.BootReason(a.Detail)) }).
		On(failpoint.HoldLeaseRenewal, failpoint.If(in.frozen.Load)).
		On(failpoint.RefuseActivation, failpoint.If(func() bool { return sc.refuses() && dep == "v2" }))
	in.w = sc.e.owner(dep, pid, func(c *Config) {
		c.LeaseTTL, c.LeaseRenew = mxLeaseTTL, mxLeaseRenew
		c.HandoffStartTimeout = mxStartTimeout
		c.Failpoints = f
	})
	sc.mu.Lock()
	sc.insts = append(sc.insts, in)
	sc.mu.Unlock()
	return in
}

// inst is the live instance of process pid.
func (sc *mxScenario) inst(pid string) *mxInst {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for i := len(sc.insts) - 1; i >= 0; i-- {
		if sc.insts[i].pid == pid {
			return sc.insts[i]
		}
	}
	return nil
}

func (sc *mxScenario) live() []*mxInst {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var out []*mxInst
	for _, in := range sc.insts {
		if !in.crashed.Load() {
			out = append(out, in)
		}
	}
	return out
}

// crash stops the instance abruptly: no write after this, the lease not
// released. Safe from any goroutine, including the instance's own.
func (in *mxInst) crash() {
	in.crashed.Store(true)
	in.w.cfg.NC.Close()
	in.w.Cancel()
}

// at is every handoff hook of the instance.
func (in *mxInst) at(p mxPoint) error {
	if in.crashed.Load() {
		return errCrash
	}
	if cut := in.cutoff.Load(); p.side == onSource && cut != nil && (cut.at == nil || *cut.at == p) &&
		in.cutoff.CompareAndSwap(cut, nil) {
		in.freezeUntil(cut.free)
	}
	if p != in.sc.c.point || !in.sc.fired.CompareAndSwap(false, true) {
		return nil
	}
	defer close(in.sc.acted)
	return in.sc.act(in)
}

// atConsumer is the AfterConsumer hook. A handoff successor's run waits
// here until the fault at an earlier point has been applied, so the fault
// never races with the successor's first step.
func (in *mxInst) atConsumer(reason runtime.BootReason) error {
	if in.crashed.Load() {
		return errCrash
	}
	p := mxPoint{onDriver, true, stepConsumer}
	if reason != runtime.BootHandoff {
		return nil
	}
	if p == in.sc.c.point && in.sc.fired.CompareAndSwap(false, true) {
		defer close(in.sc.acted)
		return in.sc.act(in)
	}
	select {
	case <-in.sc.acted:
	case <-time.After(wait):
	}
	if in.crashed.Load() {
		return errCrash
	}
	return nil
}

// freezeUntil holds the instance as a frozen process until ch is closed:
// its lease is not renewed (it fences itself; the server expires it).
func (in *mxInst) freezeUntil(ch chan struct{}) {
	in.frozen.Store(true)
	close(in.sc.cut)
	<-ch
	in.frozen.Store(false)
}

// act applies the scenario's fault at its point, in the hook of instance
// in; a non-nil error stops that side there.
func (sc *mxScenario) act(in *mxInst) error {
	side := sc.c.point.side
	switch sc.c.fault {
	case fCrashSource, fCrashCandidate:
		pid := "p1"
		if sc.c.fault == fCrashCandidate {
			pid = "p2"
		}
		victim := sc.inst(pid)
		victim.crash()
		sc.hit <- mxHit{crashed: victim}
		if victim == in {
			return errCrash
		}
		return nil
	case fStall:
		sc.hit <- mxHit{}
		if side == onSource {
			in.frozen.Store(true) // past its lease: it fences itself meanwhile
			time.Sleep(mxStall)
			in.frozen.Store(false)
			return nil
		}
		time.Sleep(mxStall) // past the source's start timeout
		return nil
	case fCommand:
		if _, _, err := sc.e.SendTo(context.Background(), sc.id, stamped("n1", "v2", "arrived at "+sc.c.point.String())); err != nil {
			sc.errorf("send n1: %v", err)
		}
		sc.hit <- mxHit{}
		return nil
	case fLate:
		sc.hit <- mxHit{}
		if side == onSource {
			in.freezeUntil(sc.free)
			return nil
		}
		// Cut the source off at its next step (it is waiting for the
		// start's answer, or has it already at the driver's point).
		src := sc.inst("p1")
		if side == onDriver {
			// The source, cut off since the start's answer (armed by
			// run), comes back just as the successor boots.
			sc.awaitLateAdoption(src)
			close(sc.free)
			return nil
		}
		src.cutoff.Store(&mxCut{free: sc.free})
		return nil
	}
	return nil
}

// awaitLateAdoption waits (in a hook) until the frozen source's lease has
// expired and the record no longer names it. The candidate's run is held
// only at the driver's point; the source may have passed its last hook.
func (sc *mxScenario) awaitLateAdoption(src *mxInst) {
	select {
	case <-sc.cut:
	case <-time.After(wait):
		sc.errorf("late source: never cut off")
		return
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		cur, err := sc.e.Store.LeaderSession(context.Background(), sc.id)
		if err == nil && cur.Record.OwnerProcess != "p1" && !src.w.lease.valid() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	sc.errorf("late source: the record still names p1 or its lease is live")
}

func (sc *mxScenario) run() {
	t, c := sc.t, sc.c
	e := newEnv(t)
	sc.e = e
	sc.start("v1", "p1")
	sc.start("v2", "p2")
	sc.id = e.Start("v1").SessionID
	id := sc.id
	if c.fault == fLate {
		sc.start("v1", "p1b") // adopts the session of the frozen source
		if c.point.side == onDriver {
			at := mxPoint{onSource, true, handoff.StepStart}
			sc.inst("p1").cutoff.Store(&mxCut{at: &at, free: sc.free})
		}
	}
	e.Send(id, stamped("a1", "v1", "warm up"))
	e.WaitOutput(id, "warm up")
	before, _ := e.session(id)
	writes := e.watchRecord(id)

	e.Send(id, stamped("t1", "v2", "trigger"))
	var hit mxHit
	select {
	case hit = <-sc.hit:
	case <-time.After(wait):
		t.Fatalf("%s: the point was never reached", c)
	}
	switch c.fault {
	case fCrashSource, fCrashCandidate:
		// Restart the crashed process (same ID), as after a SIGKILL.
		<-hit.crashed.w.Done()
		sc.start(hit.crashed.dep, hit.crashed.pid)
	case fLate:
		if c.point.side != onDriver {
			select {
			case <-sc.cut:
			case <-time.After(wait):
				t.Fatalf("%s: the source was never cut off", c)
			}
			src := sc.inst("p1")
			e.Eventually(wait, "the late source's lease to expire and the session to be adopted", func() bool {
				cur, err := e.Store.LeaderSession(t.Context(), id)
				return err == nil && cur.Record.OwnerProcess != "p1" && cur.Record.State == record.StateActive &&
					!src.w.lease.valid()
			})
			close(sc.free)
		}
		src := sc.inst("p1")
		e.Eventually(wait, "the late source to let go of the session", func() bool {
			return !slices.Contains(src.w.Loaded(), id)
		})
	}
	<-sc.acted

	// The trigger (and a command that arrived meanwhile) are answered.
	e.WaitOutput(id, "trigger")
	sent := []string{"a1", "t1"}
	if c.fault == fCommand {
		e.WaitOutput(id, "arrived at "+c.point.String())
		sent = append(sent, "n1")
	}
	owner := sc.waitOneOwner(id)
	e.Send(id, stamped("z1", owner.dep, "later"))
	evs := e.WaitOutput(id, "later")
	sent = append(sent, "z1")
	owner = sc.waitOneOwner(id)

	sc.mu.Lock()
	for _, s := range sc.errs {
		t.Error(s)
	}
	sc.mu.Unlock()
	sc.check(evs, sent, before, writes())
	sc.expect(evs)
	t.Logf("%s: owner %s (%s), epoch %d→%d, applied %v", c, owner.pid, owner.dep, before.Record.Epoch,
		e.mustSession(id).Record.Epoch, e.Applied(evs))
}

// waitOneOwner waits until the record is active and exactly one live
// instance runs the session — the process the record names.
func (sc *mxScenario) waitOneOwner(id string) *mxInst {
	var owner *mxInst
	var why string
	deadline := time.Now().Add(wait)
	for {
		cur, err := sc.e.Store.LeaderSession(sc.t.Context(), id)
		var running []*mxInst
		for _, in := range sc.live() {
			if slices.Contains(in.w.Loaded(), id) {
				running = append(running, in)
			}
		}
		switch {
		case err != nil:
			why = err.Error()
		case cur.Record.State != record.StateActive:
			why = "record " + string(cur.Record.State)
		case len(running) != 1:
			why = fmt.Sprintf("%d live owners run it", len(running))
		case running[0].pid != cur.Record.OwnerProcess || running[0].dep != cur.Record.DeploymentID:
			why = fmt.Sprintf("run by %s but the record names %s/%s", running[0].pid, cur.Record.DeploymentID, cur.Record.OwnerProcess)
		default:
			owner = running[0]
		}
		if owner != nil {
			return owner
		}
		if time.Now().After(deadline) {
			sc.t.Fatalf("%s: no single owner: %s", sc.c, why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) mustSession(id string) record.Session {
	cur, _ := e.session(id)
	return cur
}

// check asserts the invariants every scenario shares.
func (sc *mxScenario) check(evs []wire.Event, sent []string, before record.Session, writes []sessionWrite) {
	t, e, id := sc.t, sc.e, sc.id
	// Event stream: contiguous seqs from 1 (so none duplicated), every
	// command applied at most once...
	e.CheckStream(evs)
	// ...every accepted command exactly once, in stream order.
	applied := e.Applied(evs)
	var ids []string
	for i, a := range applied {
		ids = append(ids, a.CommandID)
		if i > 0 && a.Seq <= applied[i-1].Seq {
			t.Fatalf("%s: applied out of stream order: %+v", sc.c, applied)
		}
	}
	if !slices.Equal(ids, sent) {
		t.Fatalf("%s: applied %v, want %v", sc.c, ids, sent)
	}
	// No agent step executed twice.
	seen := map[string]string{}
	for _, x := range e.log.Entries() {
		if x.SessionID != id {
			continue
		}
		if p, dup := seen[x.StepKey]; dup {
			t.Fatalf("%s: step %s executed by %s and %s", sc.c, x.StepKey, p, x.Process)
		}
		seen[x.StepKey] = x.Process
	}
	for _, k := range e.StepKeys(evs) {
		if _, ok := seen[k]; !ok {
			t.Fatalf("%s: committed step %s not in the execution log", sc.c, k)
		}
	}
	// Record writes: epochs never go back (no late commit of a fenced
	// run), one run per epoch, a run never writes again after a later
	// epoch, nor after its fenced process released it (the release names
	// no run, and is the last write of its epoch).
	if len(writes) < 2 { // at least the stage and whatever settled it
		t.Fatalf("%s: the record watch saw %d writes", sc.c, len(writes))
	}
	last := before.Record.Epoch
	runAt := map[uint64]string{last: before.Record.OwnerRunID}
	released := map[uint64]bool{}
	for k, w := range writes {
		if w.deleted {
			t.Fatalf("%s: record deleted at revision %d", sc.c, w.revision)
		}
		if w.epoch < last {
			t.Fatalf("%s: write %d (rev %d) by run %s at epoch %d after epoch %d: a late write", sc.c, k, w.revision, w.run, w.epoch, last)
		}
		if released[w.epoch] {
			t.Fatalf("%s: write %d (rev %d) by run %q at epoch %d after its release", sc.c, k, w.revision, w.run, w.epoch)
		}
		if w.run == "" {
			released[w.epoch], last = true, w.epoch
			continue
		}
		if r, ok := runAt[w.epoch]; ok && r != w.run {
			t.Fatalf("%s: epoch %d written by runs %s and %s", sc.c, w.epoch, r, w.run)
		}
		runAt[w.epoch], last = w.run, w.epoch
	}
	// A late source neither pulled (its consumer, deleted by its
	// successor, was not recreated) nor can commit at the revision it held.
	if sc.c.fault == fLate {
		if e.ConsumerExists(before.Record.Consumer) {
			t.Fatalf("%s: the late source's consumer %s exists", sc.c, before.Record.Consumer)
		}
		rec := before.Record
		rec.WriteCounter++
		if _, err := e.Store.UpdateSession(t.Context(), rec, before.Revision); !errors.Is(err, record.ErrConflict) {
			t.Fatalf("%s: a late commit at revision %d: %v, want a conflict", sc.c, before.Revision, err)
		}
	}
	// No marker left once the session settled.
	e.Eventually(wait, "no handoff marker", func() bool {
		_, _, err := e.Store.GetMarker(t.Context(), id)
		return errors.Is(err, record.ErrNotFound)
	})
}

// expect asserts the verdicts that follow from the fault and point alone.
func (sc *mxScenario) expect(evs []wire.Event) {
	t, p, f := sc.t, sc.c.point, sc.c.fault
	by := ""
	for _, ev := range evs {
		if harness.IsApplied("t1")(ev) {
			by = ev.DeploymentID
		}
	}
	activated := p.side == onDriver || p.side == onCandidate && p.after &&
		(p.step == handoff.StepActivate || p.step == handoff.StepUnmark) ||
		p.side == onSource && p.after && (p.step == handoff.StepStart || p.step == handoff.StepConfirm || p.step == handoff.StepCleanup) ||
		p == mxPoint{onSource, false, handoff.StepConfirm}
	beforeCheck := p.side == onSource && (p.step == handoff.StepStage || p.step == handoff.StepMark ||
		p.step == handoff.StepCheckBacklog && !p.after)
	if n := harness.Count(evs, wire.EventHandoffCompleted); n > 1 {
		t.Fatalf("%s: %d handoff.completed", sc.c, n)
	}
	switch {
	case f == fCommand && beforeCheck:
		sk := harness.AllData[wire.HandoffSkipped](t, evs, wire.EventHandoffSkipped)
		if len(sk) == 0 || sk[0].CommandID != "t1" || sk[0].Reason != handoff.SkipQueued || by != "v1" {
			t.Fatalf("%s: want the trigger skipped (queued) and applied by v1; skipped %+v, applied by %s", sc.c, sk, by)
		}
	case sc.refuses():
		if by != "v1" || harness.Count(evs, wire.EventHandoffFailed) == 0 {
			t.Fatalf("%s: want the trigger applied by v1 after handoff.failed; applied by %s, %s", sc.c, by, harness.Kinds(evs))
		}
	case (f == fStall || f == fCrashCandidate) && p.side == onCandidate && !activated:
		// The start times out; the source's reclaim fences the candidate.
		if by != "v1" || harness.Count(evs, wire.EventHandoffFailed) == 0 {
			t.Fatalf("%s: want the source to keep the session (handoff.failed, trigger applied by v1); applied by %s, %s", sc.c, by, harness.Kinds(evs))
		}
	case activated, f == fCommand:
		if by != "v2" {
			t.Fatalf("%s: want the session moved to v2 (trigger applied by v2); applied by %s, %s", sc.c, by, harness.Kinds(evs))
		}
	}
	if by == "" {
		t.Fatalf("%s: the trigger was not applied", sc.c)
	}
}

// watchRecord records every write of the session record from now on; the
// returned function stops watching and returns them.
func (e *env) watchRecord(id string) func() []sessionWrite {
	e.t.Helper()
	bucket, err := e.JS.KeyValue(e.t.Context(), e.Names.SessionsBucket())
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, stop := context.WithCancel(e.t.Context())
	w, err := bucket.Watch(ctx, id, jetstream.UpdatesOnly())
	if err != nil {
		stop()
		e.t.Fatal(err)
	}
	var mu sync.Mutex
	var out []sessionWrite
	done := make(chan struct{})
	go func() {
		defer close(done)
		for u := range w.Updates() {
			if u == nil {
				continue
			}
			sw, ok := toSessionWrite(u)
			if !ok {
				continue
			}
			mu.Lock()
			out = append(out, sw)
			mu.Unlock()
		}
	}()
	return func() []sessionWrite {
		time.Sleep(200 * time.Millisecond) // the watch trails the writes
		stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return out
	}
}
