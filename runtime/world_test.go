package runtime_test

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/baton-rt/baton/runtime"
	"pgregory.net/rapid"
)

// world plays the driver and the inbox stream for the property tests. It
// keeps its own view of what is committed and published, and checks every
// effect against the rules (see oracle_test.go).
type world struct {
	t         *rapid.T
	broken    func(*runtime.Machine) // breaks a rule on purpose (nil: none)
	cfg       runtime.Config
	m         *runtime.Machine
	runs      int
	now       time.Time
	booted    bool
	stream    []runtime.Command
	firstSeq  map[string]uint64 // first sequence of each command ID
	fed       map[uint64]bool   // sequences fed to the current machine
	cursor    int               // next stream index the consumer delivers
	committed runtime.Snapshot
	pending   *runtime.Commit
	fedAt     map[uint64]bool // what was fed when the pending commit was formed
	uncertain bool
	step      *runtime.RunStep
	cancelled bool
	handoff   *runtime.Handoff
	triggers  map[uint64]string // handoff triggers → skip reason reported
	wantSkip  map[uint64]string // expected handoff.skipped reasons
	published []runtime.Event
	applied   map[string]int  // command ID → committed applications
	refused   map[string]int  // command ID → committed command.rejected events
	steps     map[string]bool // committed step keys
	aborted   map[string]bool // steps whose context was cancelled (this run)
	retried   map[string]int  // step key → its last turn.step_retried attempt (this run)
	ends      int
	deleted   map[uint64]bool // applied commands the driver deleted from the inbox (Forget)
	forgets   runtime.Forgotten
	reported  []uint64 // deleted and reported to this run's machine (Forgotten)
	kept      bool     // a delete failed in this run
	landed    int      // commits landed in this run
	lastNew   int      // commands the last landed commit processed
	mustDrop  []uint64 // reported before the pending commit formed

	// Busy modes (busy_property_test.go). This run's receipt decisions:
	modes       map[uint64]string // each fed delivery's effective mode
	binds       map[uint64]string // interrupts and rollbacks → the turn they act on
	refusedBusy map[uint64]bool   // reject-mode deliveries refused busy
	supBy       map[uint64]uint64 // queued deliveries a latest one superseded → its seq
	// The scheduler's one debounce schedule (a new arm replaces it), and
	// every debounce timer ID armed so far (for stale fires).
	dtimer    *runtime.Timer
	dtimerIDs []string
	// Across runs, from landed commits only:
	outcomes map[uint64]string    // stream sequence → its terminal outcome event
	lastFIFO uint64               // the last command applied through the FIFO
	skipped  map[string]bool      // step keys committed as step.interrupted
	starts   map[string]turnStart // turn → what it found when it started
	// Usage: what folding the finished step adds (set by stepDone until
	// its commit forms) and what the pending commit must add.
	nextFold *runtime.Usage
	foldAdds runtime.Usage
	// trace holds the last inputs and effects, formatted on a failure.
	trace  [traceLen]any
	traced int
}

const traceLen = 60

func newWorld(t *rapid.T, broken func(*runtime.Machine)) *world {
	w := &world{t: t, broken: broken, now: epoch, firstSeq: map[string]uint64{},
		applied: map[string]int{}, refused: map[string]int{}, steps: map[string]bool{}, deleted: map[uint64]bool{},
		outcomes: map[uint64]string{}, skipped: map[string]bool{}, starts: map[string]turnStart{}}
	w.cfg = runtime.Config{SessionID: "s", Deployment: "A", EventKinds: []string{"x.custom"},
		MaxAppliedAbove: rapid.SampledFrom([]int{2, 8, 0}).Draw(t, "maxAbove")}
	if rapid.Bool().Draw(t, "timeout") {
		w.cfg.Timeout = time.Hour
	}
	if rapid.Bool().Draw(t, "limits") {
		w.cfg.Limits = runtime.Limits{
			MaxStepsPerTurn:     rapid.IntRange(0, 3).Draw(t, "maxSteps"),
			MaxTokensPerTurn:    int64(rapid.SampledFrom([]int{0, 25, 60}).Draw(t, "maxTurnTokens")),
			MaxTokensPerSession: int64(rapid.SampledFrom([]int{0, 100, 250}).Draw(t, "maxSessionTokens")),
		}
	}
	if rapid.Bool().Draw(t, "retries") {
		w.cfg.Retry = runtime.RetryPolicy{Retries: rapid.IntRange(0, 2).Draw(t, "retryN"), Backoff: []time.Duration{time.Second}}
	}
	w.cfg.MaxDebounce = rapid.SampledFrom([]time.Duration{0, 3 * time.Second}).Draw(t, "maxDebounce")
	w.boot(runtime.BootNew)
	return w
}

// boot starts a new owner run from the committed snapshot and recreates the
// consumer at Applied.Next, as a driver does after a crash or handoff.
func (w *world) boot(reason runtime.BootReason) { w.bootWith(runtime.Boot{Reason: reason}) }

// bootWith starts a new owner run with b (Now is the world's clock).
func (w *world) bootWith(b runtime.Boot) {
	w.runs++
	w.cfg.RunID = "r" + strconv.Itoa(w.runs)
	m, err := runtime.NewMachine(w.cfg, w.committed)
	if err != nil {
		w.t.Fatalf("NewMachine: %v", err)
	}
	if w.broken != nil {
		w.broken(m)
	}
	w.m, w.pending, w.uncertain, w.step, w.cancelled, w.handoff = m, nil, false, nil, false, nil
	w.fed, w.triggers, w.wantSkip = map[uint64]bool{}, map[uint64]string{}, map[uint64]string{}
	w.aborted, w.retried = map[string]bool{}, map[string]int{}
	w.modes, w.refusedBusy, w.supBy, w.binds = map[uint64]string{}, map[uint64]bool{}, map[uint64]uint64{}, map[uint64]string{}
	w.nextFold, w.foldAdds = nil, runtime.Usage{}
	w.reported, w.forgets = nil, runtime.Forgotten{}
	w.kept, w.landed, w.lastNew = false, 0, 0
	w.cursor = 0
	for w.cursor < len(w.stream) && w.stream[w.cursor].Seq < w.committed.Applied.Next {
		w.cursor++
	}
	w.booted = true
	b.Now = w.now
	w.handle(b)
}

// handle feeds one input and performs the effects like a driver.
func (w *world) handle(in runtime.Input) []runtime.Effect {
	w.record(in)
	effs, err := w.m.Handle(in)
	if err != nil {
		w.t.Fatalf("Handle(%T): %v", in, err)
	}
	for _, e := range effs {
		w.record(e)
		w.perform(e)
	}
	if f := w.forgets; len(f.Seqs)+len(f.Kept) > 0 {
		w.forgets = runtime.Forgotten{}
		w.reported = append(w.reported, f.Seqs...)
		w.handle(f)
	}
	return effs
}

// onForget plays the driver's delete of applied commands from the inbox:
// each must be applied in the committed record, above its lowest
// unapplied sequence. Now and then the delete fails (kept).
func (w *world) onForget(f runtime.Forget) {
	coverage.add("forget")
	a := w.committed.Applied
	for _, s := range f.Seqs {
		w.require(s >= a.Next && a.Has(s), "Forget %d: not an applied command above %d (deleted before: %v)", s, a.Next, w.deleted[s])
	}
	if rapid.IntRange(0, 9).Draw(w.t, "forgetFails") == 5 {
		w.kept = true
		w.forgets.Kept = append(w.forgets.Kept, f.Seqs...)
		return
	}
	for _, s := range f.Seqs {
		w.deleted[s] = true
	}
	w.forgets.Seqs = append(w.forgets.Seqs, f.Seqs...)
}

// done reports a command processed in v, or deleted after it was.
func (w *world) done(v runtime.Snapshot, seq uint64) bool {
	return v.Applied.Has(seq) || w.deleted[seq]
}

func (w *world) perform(e runtime.Effect) {
	switch e := e.(type) {
	case runtime.Commit:
		w.onCommit(e)
	case runtime.Publish:
		w.onPublish(e)
	case runtime.RunStep:
		w.onRunStep(e)
	case runtime.CancelStep:
		w.require(w.step != nil && !w.cancelled && e.TurnID == w.step.Input.TurnID, "CancelStep without its step")
		w.cancelled = true
	case runtime.Handoff:
		w.require(w.handoff == nil && w.step == nil && w.pending == nil, "Handoff while busy")
		w.handoff = &e
	case runtime.Forget:
		w.onForget(e)
	case runtime.ResolveCommit:
		w.require(w.pending != nil, "ResolveCommit without commit")
		w.uncertain = true
	case runtime.ArmTimer:
		if e.Debounce {
			w.onArmWindow(e.Timer)
		}
	}
}

func (w *world) onCommit(c runtime.Commit) {
	w.require(w.pending == nil && w.step == nil && w.handoff == nil, "commit while something is in flight")
	w.pending, w.fedAt = &c, maps.Clone(w.fed)
	w.mustDrop = slices.Clone(w.reported)
	w.foldAdds = runtime.Usage{}
	if w.nextFold != nil { // the commit of the boundary that folds the finished step
		w.foldAdds, w.nextFold = *w.nextFold, nil
	}
}

// onPublish checks that only committed events are published, contiguously
// and identically on every re-publication.
func (w *world) onPublish(p runtime.Publish) {
	for _, e := range p.Events {
		w.require(e.Seq <= w.committed.EventSeq, "published an uncommitted event %d", e.Seq)
		n := uint64(len(w.published))
		switch {
		case e.Seq <= n:
			old := w.published[e.Seq-1]
			w.require(old.Kind == e.Kind && bytes.Equal(old.Data, e.Data), "event %d changed on re-publish", e.Seq)
		case e.Seq == n+1:
			w.published = append(w.published, e)
		default:
			w.t.Fatalf("published event %d after %d: gap", e.Seq, n)
		}
	}
}

// onRunStep checks that a step runs alone, against committed state, and
// that no committed step ever runs again.
func (w *world) onRunStep(r runtime.RunStep) {
	w.require(w.step == nil && w.pending == nil && w.handoff == nil, "step while something is in flight")
	t := w.committed.Turn
	w.require(t != nil && t.Open && !w.committed.Paused, "step without an open turn")
	w.require(r.Input.TurnID == t.ID && r.Input.Step == t.Steps+1, "step %s is not the next step", r.Input.Key())
	w.require(len(r.Input.Inputs) == len(t.Inputs), "step inputs differ from committed inputs")
	w.require(!w.steps[r.Input.Key()], "committed step %s runs again", r.Input.Key())
	w.require(!w.skipped[r.Input.Key()], "interrupted step %s: its key runs again", r.Input.Key())
	w.step, w.cancelled = &r, false
}

func (w *world) require(ok bool, format string, args ...any) {
	if !ok {
		w.t.Helper()
		w.t.Fatalf(format+"\n%s", append(args, w.traceText())...)
	}
}

func (w *world) record(x any) {
	w.trace[w.traced%traceLen] = x
	w.traced++
}

// traceText formats the trace: the last inputs and effects, oldest first.
func (w *world) traceText() string {
	var b strings.Builder
	b.WriteString("last inputs (>) and effects (<), oldest first:\n")
	for i := max(0, w.traced-traceLen); i < w.traced; i++ {
		switch x := w.trace[i%traceLen].(type) {
		case runtime.Received:
			c := x.Cmd
			fmt.Fprintf(&b, "> recv %d %s %s mode=%q caller=%q dep=%s timer=%q refused=%q rejected=%q\n",
				c.Seq, c.ID, c.Kind, c.Mode, c.Caller, c.Deployment, c.TimerID, c.Refused, c.Rejected)
		case runtime.StepDone:
			fmt.Fprintf(&b, "> step done %s/%d %s err=%q usage=%+v\n", x.TurnID, x.Step, x.Result.Outcome, x.Result.Error, x.Result.Usage)
		case runtime.Commit:
			fmt.Fprintf(&b, "< commit %s#%d next=%d turn=%s debounce=%v usage=%+v\n", x.Snapshot.Writer.RunID, x.Snapshot.Writer.Write,
				x.Snapshot.Applied.Next, turnText(x.Snapshot.Turn), x.Snapshot.Debounce != nil, x.Snapshot.Usage)
			for _, e := range x.Snapshot.Outbox {
				fmt.Fprintf(&b, "    %d %s %s\n", e.Seq, e.Kind, e.Data)
			}
		case runtime.RunStep:
			fmt.Fprintf(&b, "< run %s inputs=%d\n", x.Input.Key(), len(x.Input.Inputs))
		default:
			fmt.Fprintf(&b, "%s %T %+v\n", map[bool]string{true: ">", false: "<"}[isInput(x)], x, x)
		}
	}
	return b.String()
}

func isInput(x any) bool { _, ok := x.(runtime.Input); return ok }

func turnText(t *runtime.Turn) string {
	if t == nil {
		return "-"
	}
	return fmt.Sprintf("%s(caller=%q steps=%d open=%v inputs=%d)", t.ID, t.Caller, t.Steps, t.Open, len(t.Inputs))
}

// view is the machine's working state as the world knows it.
func (w *world) view() runtime.Snapshot {
	if w.pending != nil {
		return w.pending.Snapshot
	}
	return w.committed
}

// dup reports whether the machine must drop c as already seen.
func (w *world) dup(c runtime.Command) bool {
	return w.fed[c.Seq] || w.done(w.committed, c.Seq) || w.firstSeq[c.ID] != c.Seq
}

// queued reports a fed command the machine has not processed yet.
func (w *world) queued() bool {
	v := w.view()
	for _, c := range w.unprocessed(v) {
		if w.fed[c.Seq] && w.firstSeq[c.ID] == c.Seq && !w.done(v, c.Seq) {
			return true
		}
	}
	return false
}

// inQueue is the machine's queue as the world knows it: the fed commands,
// not duplicates, it has not processed yet, in sequence order.
func (w *world) inQueue() []runtime.Command {
	v := w.view()
	var q []runtime.Command
	for _, c := range w.unprocessed(v) {
		if w.fed[c.Seq] && w.firstSeq[c.ID] == c.Seq && !w.done(v, c.Seq) {
			q = append(q, c)
		}
	}
	return q
}

// unprocessed is the stream from the first command at or above v's
// Applied.Next: everything before it is processed.
func (w *world) unprocessed(v runtime.Snapshot) []runtime.Command {
	i, _ := slices.BinarySearchFunc(w.stream, v.Applied.Next, func(c runtime.Command, next uint64) int { return cmp.Compare(c.Seq, next) })
	return w.stream[i:]
}

// idleReason is docs/runtime.md's idle definition, written independently of
// the machine: "" = idle, else the documented skip reason.
func (w *world) idleReason() string {
	v := w.view()
	switch {
	case v.Ended != "":
		return runtime.SkipBusy
	case v.Paused:
		return runtime.SkipPaused
	case v.Waits.Input != nil:
		return runtime.SkipInput
	case v.Waits.Auth != nil:
		return runtime.SkipAuthorization
	case len(v.Waits.Tasks) > 0:
		return runtime.SkipTask
	case w.queued():
		return runtime.SkipQueued
	case w.step != nil || w.pending != nil || w.handoff != nil || v.Turn != nil || v.Debounce != nil:
		return runtime.SkipBusy
	}
	return ""
}

// target returns the deployment a command asks to move to, if any.
func (w *world) target(c runtime.Command) string {
	t := ""
	switch {
	case declined(c) || w.refusedBusy[c.Seq]: // a busy reject is refused before the handoff decision
	case c.Kind == runtime.KindDeliver:
		t = c.Deployment
	case c.Kind == runtime.KindMove:
		t = c.Target
	}
	if t == w.cfg.Deployment {
		return ""
	}
	return t
}
