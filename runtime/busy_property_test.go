package runtime_test

import (
	"bytes"
	"cmp"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"pgregory.net/rapid"
)

// Busy modes in TestMachineProperties (docs/runtime.md R9b). The world
// models what the machine settles when it receives a delivery (decide: its
// effective mode, a reject's busy refusal, the turn an interrupt or
// rollback acts on, a latest's supersession of its caller's queued
// deliveries), plays the scheduler of the debounce window's timer (fire),
// and checks these invariants on every landed
// commit — runs with crashes, conflicts and handoffs included, where a new
// machine starts from the last committed snapshot and the stream is fed
// again from Applied.Next — and at the end of every run (drain):
//
//   - Terminal outcomes. Every command of the stream that is not a
//     duplicate has at most one of command.applied, command.rejected,
//     command.superseded and wire.rejected among all committed events, at
//     any time, naming it by sequence and ID; wire.rejected exactly for an
//     undecodable one. At the end (drain: every step finished, every
//     debounce timer fired, everything fed and committed) it has exactly
//     one iff the committed record marks it processed, and, unless the
//     session ended, every one does. After an end the commands the ended
//     session never processed — still queued when it ended, or received
//     after — have none (the machine refuses to receive after an end).
//     A duplicate never has one.
//   - Which outcome. A delivery the world saw refused busy on receipt
//     (mode reject, with a turn live, a window open or a FIFO command
//     ahead) ends with command.rejected {reason: busy}; one a later latest
//     delivery of its caller superseded while it was queued (not a steer,
//     not an interrupt or rollback acting on the live turn, not the pending
//     handoff trigger), with command.superseded {by} naming that delivery;
//     every other one with command.applied.
//   - FIFO order. The commands applied through the FIFO — a delivery that
//     starts a turn (queue, reject, latest, steer, or an interrupt or
//     rollback received while no turn of its caller was live, or whose
//     turn ended), a debounce delivery that opens or joins the window,
//     clear and compact — apply in stream sequence order across every
//     commit and run. Steers joining their caller's open turn, and
//     interrupts and rollbacks acting on the turn of their caller live
//     when they were received (and only on that turn), pass the FIFO.
//   - Step keys. No committed step key runs again (world_test.go), and no
//     key committed as step.interrupted either: the step counter advances
//     past an interrupted step (an interrupt continues the turn with step
//     N+1; cancel, reset and timeout end it). A step is discarded as
//     interrupted only if the driver cancelled it (CancelStep).
//   - Usage. The committed session usage never decreases, rollbacks
//     included, and each commit adds exactly what the step it folds
//     reported (see foldUsage).
//   - Rollback. The commit whose last turn.rolled_back names turn T has
//     the state T found when it started (the committed state of the commit
//     that started it) and T's history prefix, and, while the turn the
//     rollback started is live at its end, exactly that prefix plus one
//     history entry per input of the new turn (its own delivery, and what
//     joined it in the same boundary). Every turn a commit starts records
//     in turn.before what it found (cross-checked here).
//   - Windows. A window is open only while no turn is live; it holds only
//     debounce deliveries, at most one step's inputs, and closes no later
//     than the owner's maximum after it opened. A commit that opens or
//     extends it arms its timer (ArmTimer{Debounce}) once it lands. The
//     timeout of the window's timer starts one turn whose first inputs
//     are the window's, in order (turn.started names the first); any other
//     debounce timeout has no effect. No FIFO command passes an open
//     window.
//   - Configure. Only a configure command changes the session's default
//     mode, and a commit that applies one has its default.

// busyCoverage are the busy-mode scenarios the property runs must reach.
var busyCoverage = []string{
	"busy rejected", "interrupt joined", "rollback", "rollback restored", "rollback history",
	"window joined", "window extended", "window closed", "stale timeout", "default mode", "interrupted usage", "cancelled usage",
}

// turnStart is what a turn found when it started: the agent state and the
// history (shared with the committed snapshot: entries are immutable).
type turnStart struct {
	state   []byte
	history []runtime.Entry
}

// genMode draws a delivery's mode: each busy mode, and "" (the session's
// default) and queue and steer as often as before the busy modes; while a
// window is open, debounce half the time (to extend it).
func (w *world) genMode() string {
	if w.view().Debounce != nil && rapid.Bool().Draw(w.t, "extend") {
		return runtime.ModeDebounce
	}
	return rapid.SampledFrom([]string{
		runtime.ModeQueue, runtime.ModeQueue, runtime.ModeSteer, runtime.ModeSteer, "", "",
		runtime.ModeReject, runtime.ModeInterrupt, runtime.ModeRollback, runtime.ModeDebounce, runtime.ModeLatest,
	}).Draw(w.t, "mode")
}

// genDebounceMs draws a debounce window, some longer than an owner's
// maximum (3s or 10s in the property runs).
func genDebounceMs(t *rapid.T, label string) int64 {
	return rapid.SampledFrom([]int64{wire.MinDebounceMs, 1000, 4000, 20000}).Draw(t, label)
}

// genConfigure fills a configure command: a default mode (queue, the
// built-in default, most often) and, for debounce, its window.
func (w *world) genConfigure(c *runtime.Command) {
	c.DefaultMode = rapid.SampledFrom(append([]string{runtime.ModeQueue, runtime.ModeQueue}, wire.Modes()...)).Draw(w.t, "defaultMode")
	if c.DefaultMode == runtime.ModeDebounce {
		c.DefaultDebounceMs = genDebounceMs(w.t, "defaultDebounceMs")
	}
}

// decide models what the machine settles when it receives c, before it
// queues it: a delivery's effective mode (its own, else the session's
// default in the working snapshot, else queue); a reject that finds a
// turn live, a window open or a FIFO command queued ahead is refused; an
// interrupt or rollback acts on its caller's turn if one is live (binds);
// a latest supersedes every queued delivery of its caller that is not
// declined, not a steer, not an interrupt or rollback acting on the live
// turn and not the pending handoff trigger.
func (w *world) decide(c runtime.Command) {
	if c.Kind != runtime.KindDeliver || declined(c) {
		return
	}
	v := w.view()
	mode := cmp.Or(c.Mode, v.DefaultMode, runtime.ModeQueue)
	if c.Mode == "" && v.DefaultMode != "" {
		coverage.add("default mode")
	}
	w.modes[c.Seq] = mode
	switch mode {
	case runtime.ModeReject:
		ahead := slices.ContainsFunc(w.inQueue(), func(q runtime.Command) bool { return q.Seq < c.Seq && fifo(q) && !w.declinedNow(q) })
		w.refusedBusy[c.Seq] = v.Turn != nil || v.Debounce != nil || ahead
	case runtime.ModeInterrupt, runtime.ModeRollback:
		if v.Turn != nil && v.Turn.Caller == c.Caller {
			w.binds[c.Seq] = v.Turn.ID
		}
	case runtime.ModeLatest:
		for _, q := range w.inQueue() {
			if q.Seq < c.Seq && q.Kind == runtime.KindDeliver && !w.declinedNow(q) && q.Caller == c.Caller &&
				w.modes[q.Seq] != runtime.ModeSteer && !w.interrupting(q) && (w.handoff == nil || w.handoff.Trigger.Seq != q.Seq) {
				w.supBy[q.Seq] = c.Seq
			}
		}
	}
}

// declinedNow: c is recorded, never applied — declined by the driver, or
// refused busy or superseded on receipt in this run.
func (w *world) declinedNow(c runtime.Command) bool {
	return declined(c) || w.refusedBusy[c.Seq] || w.supBy[c.Seq] != 0
}

// declinedAt is declinedNow when only the commands in fed were received:
// a supersession is decided when the newer delivery is received.
func (w *world) declinedAt(c runtime.Command, fed map[uint64]bool) bool {
	return declined(c) || w.refusedBusy[c.Seq] || w.supBy[c.Seq] != 0 && fed[w.supBy[c.Seq]]
}

// interrupting: c is an interrupt or rollback delivery that acts on the
// live turn — the turn of its caller live when it was received — (an
// interrupt only while that turn is open or parked on an answer). Any
// other is a FIFO delivery.
func (w *world) interrupting(c runtime.Command) bool {
	v := w.view()
	t := v.Turn
	if t == nil || c.Kind != runtime.KindDeliver || w.declinedNow(c) || w.binds[c.Seq] != t.ID {
		return false
	}
	switch w.modes[c.Seq] {
	case runtime.ModeRollback:
		return true
	case runtime.ModeInterrupt:
		return t.Open || v.Waits.Input != nil || v.Waits.Auth != nil
	}
	return false
}

// foldUsage is what folding the finished step's result r adds to the
// session's usage (discarded: the step was cancelled, and the boundary
// discards r): all it reported — a failed (an invalid one's too), retried,
// interrupted or discarded step's, whatever discarded it (an interrupt or
// rollback of its turn, a cancel, reset or timeout).
func (w *world) foldUsage(r runtime.StepResult, discarded bool) runtime.Usage {
	switch {
	case !discarded:
	case slices.ContainsFunc(w.inQueue(), w.interrupting):
		coverage.add("interrupted usage")
	default:
		coverage.add("cancelled usage")
	}
	return r.Usage
}

// fire plays the scheduler: the debounce window's armed timer fires (its
// timeout enters the inbox and the schedule is done), or now and then a
// stale timeout arrives — of a timer replaced as it fired (one that never
// fired, if any), or a repeat of one that fired: the same command (same
// ID), a duplicate.
func (w *world) fire(stale bool) {
	var id string
	switch {
	case stale && len(w.dtimerIDs) > 0:
		ids := slices.DeleteFunc(slices.Clone(w.dtimerIDs), func(id string) bool {
			_, fired := w.firstSeq["timeout-"+id]
			return fired || w.dtimer != nil && w.dtimer.ID == id
		})
		if len(ids) == 0 {
			ids = w.dtimerIDs
		}
		id = rapid.SampledFrom(ids).Draw(w.t, "staleTimer")
	case w.dtimer != nil:
		id = w.dtimer.ID
		if w.dtimer.Deadline.After(w.now) {
			w.now = w.dtimer.Deadline
		}
		w.dtimer = nil
	default:
		return
	}
	w.accept(w.command(runtime.KindTimeout, func(c *runtime.Command) { c.ID, c.TimerID = "timeout-"+id, id }))
}

// onArmWindow schedules the window's timer, replacing the one scheduled —
// which now and then fired just before (its timeout is in the inbox).
func (w *world) onArmWindow(t runtime.Timer) {
	w.require(t.ID != "" && !t.Deadline.IsZero(), "debounce timer %+v", t)
	if old := w.dtimer; old != nil && old.ID != t.ID && rapid.Bool().Draw(w.t, "firedAsReplaced") {
		w.fire(false)
	}
	w.dtimer = &t
	if !slices.Contains(w.dtimerIDs, t.ID) {
		w.dtimerIDs = append(w.dtimerIDs, t.ID)
	}
}

// checkArmed: a commit that opened or extended the window is followed,
// once it lands, by the window's timer (effs: CommitDone's effects).
func (w *world) checkArmed(prev, post runtime.Snapshot, effs []runtime.Effect) {
	d := post.Debounce
	if d == nil || prev.Debounce != nil && prev.Debounce.TimerID == d.TimerID && prev.Debounce.Until.Equal(d.Until) {
		return
	}
	w.require(slices.ContainsFunc(effs, func(e runtime.Effect) bool {
		a, ok := e.(runtime.ArmTimer)
		return ok && a.Debounce && a.Timer.ID == d.TimerID && a.Timer.Deadline.Equal(d.Until)
	}), "window %s until %v committed, its timer not armed after it (effects %s)", d.TimerID, d.Until, effectTypes(effs))
}

func effectTypes(effs []runtime.Effect) string {
	var s []string
	for _, e := range effs {
		s = append(s, strings.TrimPrefix(reflect.TypeOf(e).String(), "runtime."))
	}
	return "[" + strings.Join(s, " ") + "]"
}

// fifoApplied: x is applied through the FIFO, after every command applied
// through it before (in every commit and run).
func (w *world) fifoApplied(x runtime.Command) {
	w.require(x.Seq > w.lastFIFO, "FIFO order: %d (%s %s) applied through the FIFO after %d", x.Seq, x.Kind, w.modes[x.Seq], w.lastFIFO)
	w.lastFIFO = x.Seq
}

// checkOutcomes is the end-of-run terminal outcome check (see above).
func (w *world) checkOutcomes() {
	for _, c := range w.stream {
		got := w.outcomes[c.Seq]
		if w.isDup(c) {
			w.require(got == "", "duplicate %s (seq %d) has terminal outcome %s", c.ID, c.Seq, got)
			continue
		}
		done := w.done(w.committed, c.Seq)
		w.require(done == (got != ""), "command %d (%s %s): processed %v, terminal outcome %q", c.Seq, c.Kind, c.ID, done, got)
		w.require(got != "" || w.committed.Ended != "", "command %d (%s %s) ended with no terminal outcome", c.Seq, c.Kind, c.ID)
	}
}

// terminal checks one terminal outcome event: it names a stream command
// by sequence and ID, not a duplicate, recorded processed, which had none
// before — across every commit and run.
func (sc *scan) terminal(e runtime.Event, d appliedData) {
	w := sc.w
	x := w.cmd(d.Seq)
	w.require(d.CommandID == x.ID, "%s names %s at seq %d, the stream holds %s", e.Kind, d.CommandID, d.Seq, x.ID)
	w.require(!w.isDup(x), "%s for duplicate %s (seq %d)", e.Kind, x.ID, x.Seq)
	w.require(w.outcomes[x.Seq] == "", "command %d (%s): a second terminal outcome %s after %s", x.Seq, x.ID, e.Kind, w.outcomes[x.Seq])
	w.require((e.Kind == runtime.EventWireRejected) == (x.Rejected != ""), "command %d (rejected %q): terminal outcome %s", x.Seq, x.Rejected, e.Kind)
	w.require(sc.post.Applied.Has(x.Seq), "%s for %d, which the record does not list", e.Kind, x.Seq)
	w.outcomes[x.Seq] = e.Kind
}

// superseded: command.superseded names a delivery a latest delivery of
// its caller superseded while it was queued, in place of command.applied
// and of a handoff skip, processed in immediate order.
func (sc *scan) superseded(i int, d appliedData) {
	w, x := sc.w, sc.w.cmd(d.Seq)
	by := w.supBy[x.Seq]
	w.require(by != 0 && d.By == by && w.fedAt[by], "command.superseded %d by %d: the world saw it superseded by %d", x.Seq, d.By, by)
	w.require(i == 0 || sc.events[i-1].Kind != runtime.EventHandoffSkipped || decode(sc.events[i-1]).Seq != x.Seq,
		"superseded %d recorded a handoff skip", x.Seq)
	sc.immediateOrder(x)
	sc.done[x.Seq] = true
}

// turnStarted tracks the live turn; a turn right after turn.rolled_back is
// the rollback's, and found what the rollback restored.
func (sc *scan) turnStarted(i int, d appliedData) {
	sc.turn, sc.turnID, sc.caller = true, d.TurnID, d.Caller
	sc.started = append(sc.started, d.TurnID)
	if i > 0 && sc.events[i-1].Kind == wire.EventTurnRolledBack {
		sc.restarted = d.TurnID
		if sc.restored != nil {
			sc.startsIn[d.TurnID] = *sc.restored
		}
	}
}

// rolledBack: turn.rolled_back follows the rollback's turn.cancelled of
// the same turn; what it restores is checked at the commit's end.
func (sc *scan) rolledBack(i int, d appliedData) {
	w := sc.w
	w.require(i > 0 && sc.events[i-1].Kind == runtime.EventTurnCancelled && decode(sc.events[i-1]).TurnID == d.TurnID &&
		decode(sc.events[i-1]).CommandID != "", "turn.rolled_back %s not right after its rollback's turn.cancelled", d.TurnID)
	sc.rolled, sc.restored, sc.restarted = d.TurnID, nil, ""
	if s, ok := sc.startsIn[d.TurnID]; ok {
		sc.restored = &s
	} else if s, ok := w.starts[d.TurnID]; ok {
		sc.restored = &s
	}
}

// rollsBack: a rollback delivery of the live turn's caller records
// command.applied, the turn's waits cancelled, turn.cancelled {turnId,
// commandId}, turn.rolled_back, and then starts a fresh turn.
func (sc *scan) rollsBack(i int, x runtime.Command) {
	coverage.add("rollback")
	ev, j := sc.events, i+1
	for j < len(ev) && ev[j].Kind == runtime.EventWaitCancelled {
		j++
	}
	ok := j+2 < len(ev) && ev[j].Kind == runtime.EventTurnCancelled && ev[j+1].Kind == wire.EventTurnRolledBack &&
		ev[j+2].Kind == runtime.EventTurnStarted
	sc.w.require(ok && decode(ev[j]).TurnID == sc.turnID && decode(ev[j]).CommandID == x.ID && decode(ev[j+2]).CommandID == x.ID,
		"rollback %d of turn %s: not turn.cancelled, turn.rolled_back, turn.started", x.Seq, sc.turnID)
}

// gathered: a debounce delivery opens or joins the window at the FIFO
// head while no turn is live.
func (sc *scan) gathered(x runtime.Command) {
	w, win := sc.w, sc.post.Debounce
	coverage.add("window joined")
	if sc.window {
		coverage.add("window extended")
	}
	sc.window = true
	sc.fifoOrder(x)
	w.fifoApplied(x)
	w.require(!sc.turn, "debounce delivery %d gathered while turn %s is live", x.Seq, sc.turnID)
	w.require(win != nil && slices.ContainsFunc(win.Inputs, func(c runtime.Command) bool { return c.ID == x.ID }),
		"debounce delivery %d applied, not in the window", x.Seq)
}

// timeout: the timeout of the open window's timer closes it: its
// deliveries start one turn, first inputs first; any other debounce
// timeout (replaced, or of a closed window) has no effect.
func (sc *scan) timeout(i int, x runtime.Command) {
	if x.Kind != runtime.KindTimeout || !strings.HasPrefix(x.ID, "timeout-") { // not a debounce timer's
		return
	}
	w, win := sc.w, sc.prev.Debounce
	closes := win != nil && x.TimerID == win.TimerID
	starts := i+1 < len(sc.events) && sc.events[i+1].Kind == runtime.EventTurnStarted
	w.require(closes == starts, "timeout %d of timer %s (window %v): turn started %v", x.Seq, x.TimerID, win != nil, starts)
	if !closes {
		coverage.add("stale timeout")
		return
	}
	coverage.add("window closed")
	sc.window = false
	d := decode(sc.events[i+1])
	w.require(d.CommandID == win.Inputs[0].ID, "window's turn names %s, its first delivery is %s", d.CommandID, win.Inputs[0].ID)
	if t := sc.post.Turn; t != nil && t.ID == d.TurnID {
		n := len(win.Inputs)
		w.require(len(t.Inputs) >= n && slices.EqualFunc(t.Inputs[:n], win.Inputs, func(a, b runtime.Command) bool { return a.ID == b.ID }),
			"window's turn %s inputs %s, window %s", t.ID, ids(t.Inputs), ids(win.Inputs))
	}
}

// stepInterrupted: a step is discarded as interrupted once, only if it was
// cancelled, and never after it was committed.
func (sc *scan) stepInterrupted(d appliedData) {
	w, key := sc.w, d.TurnID+"/"+strconv.Itoa(d.Step)
	w.require(!w.steps[key] && !w.skipped[key], "step %s interrupted after it was committed or interrupted", key)
	w.require(w.aborted[key], "step %s discarded as interrupted, never cancelled", key)
	w.skipped[key] = true
}

// checkBusy runs the commit-level busy-mode checks once its events are
// scanned: usage, window, rollback, configure, and the turns' starts.
func (sc *scan) checkBusy() {
	w, prev, post := sc.w, sc.prev, sc.post
	u, p := post.Usage, prev.Usage
	w.require(u.InputTokens >= p.InputTokens && u.OutputTokens >= p.OutputTokens && u.CachedTokens >= p.CachedTokens && u.CostUSD >= p.CostUSD,
		"session usage went down: %+v after %+v", u, p)
	w.require(u == p.Add(w.foldAdds), "session usage %+v, want %+v + the folded step's %+v", u, p, w.foldAdds)
	sc.checkWindow()
	sc.checkRollback()
	sc.checkConfigure()
	// a turn started in this commit and live at its end found the state
	// committed here and the history before its inputs: each input it
	// has (no step has run) added one entry
	if t := post.Turn; t != nil && slices.Contains(sc.started, t.ID) {
		k := len(post.History) - len(t.Inputs)
		w.require(k >= 0, "turn %s has %d inputs, the history %d entries", t.ID, len(t.Inputs), len(post.History))
		b := t.Before
		w.require(b != nil && b.HistoryLen == k && bytes.Equal(b.State, post.State),
			"turn %s recorded before %+v; it found history %d, state %s", t.ID, b, k, post.State)
		w.starts[t.ID] = turnStart{state: post.State, history: post.History[:k:k]}
	}
}

// checkWindow: see "Windows" above.
func (sc *scan) checkWindow() {
	w, d := sc.w, sc.post.Debounce
	if d == nil {
		return
	}
	maxWindow := cmp.Or(w.cfg.MaxDebounce, runtime.DefaultMaxDebounce)
	w.require(sc.post.Turn == nil, "a turn is live while debounce window %s is open", d.TimerID)
	w.require(len(d.Inputs) > 0 && len(d.Inputs) <= wire.MaxTurnInputs, "window of %d inputs", len(d.Inputs))
	w.require(d.TimerID != "" && !d.Until.Before(d.OpenedAt) && !d.Until.After(d.OpenedAt.Add(maxWindow)),
		"window %s opened %v until %v (maximum %v)", d.TimerID, d.OpenedAt, d.Until, maxWindow)
	for _, c := range d.Inputs {
		w.require(c.Kind == runtime.KindDeliver && c.Mode == runtime.ModeDebounce, "window holds %s %s (%s)", c.Kind, c.ID, c.Mode)
	}
}

// checkRollback: see "Rollback" above.
func (sc *scan) checkRollback() {
	w, post, r := sc.w, sc.post, sc.restored
	if sc.rolled == "" || r == nil { // unknown: the turn started and was rolled back in this commit, after a window closed
		return
	}
	coverage.add("rollback restored")
	w.require(bytes.Equal(post.State, r.state), "rolled back %s: state %s, it started with %s", sc.rolled, post.State, r.state)
	k := len(r.history)
	w.require(len(post.History) >= k && reflect.DeepEqual(post.History[:k], r.history),
		"rolled back %s: history of %d entries does not start with the %d it started with", sc.rolled, len(post.History), k)
	if t := post.Turn; t != nil && t.ID == sc.restarted {
		coverage.add("rollback history")
		w.require(len(post.History) == k+len(t.Inputs), "rolled back %s: history of %d entries, want %d + %d inputs of %s",
			sc.rolled, len(post.History), k, len(t.Inputs), t.ID)
	}
}

// checkConfigure: see "Configure" above.
func (sc *scan) checkConfigure() {
	mode, ms := sc.prev.DefaultMode, sc.prev.DefaultDebounceMs
	if c := sc.configured; c != nil {
		mode, ms = c.DefaultMode, 0
		if mode == runtime.ModeQueue {
			mode = ""
		}
		if mode == runtime.ModeDebounce {
			ms = c.DefaultDebounceMs
		}
	}
	sc.w.require(sc.post.DefaultMode == mode && sc.post.DefaultDebounceMs == ms, "default mode %q (%d ms), want %q (%d ms)",
		sc.post.DefaultMode, sc.post.DefaultDebounceMs, mode, ms)
}
