package runtime_test

import (
	"encoding/json"
	"github.com/baton-rt/baton/wire"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/baton-rt/baton/runtime"
)

// The oracle: every landed commit is checked against the rules of
// docs/runtime.md, one event at a time.

// scan walks one commit's events.
type scan struct {
	w          *world
	prev, post runtime.Snapshot
	events     []runtime.Event
	turn       bool            // a turn is open at this point of the commit
	done       map[uint64]bool // processed earlier in this commit
	ended      bool
	open       []*runtime.Command // the stream's fed commands prev had not processed
	caughtUp   bool               // every immediate fed before the boundary is processed
	// busy modes (busy_property_test.go)
	turnID, caller string               // the live turn at this point of the commit
	window         bool                 // a debounce window is open at this point
	started        []string             // the turns started in this commit
	rolled         string               // the turn the commit's last turn.rolled_back names
	restored       *turnStart           // what that rollback restored (nil: unknown)
	restarted      string               // the turn the last rollback started
	startsIn       map[string]turnStart // turns started in this commit by a rollback
	configured     *runtime.Command     // the commit's last applied configure
}

type appliedData struct {
	CommandID string `json:"commandId"`
	Seq       uint64 `json:"seq"`
	By        uint64 `json:"by"`     // command.superseded
	Caller    string `json:"caller"` // turn.started
	TurnID    string `json:"turnId"`
	Step      int    `json:"step"`
	Reason    string `json:"reason"`
	// turn.step_retried
	Attempt int    `json:"attempt"`
	Code    string `json:"code"`
	// turn.completed and limit.reached
	StopReason string `json:"stopReason"`
	Limit      string `json:"limit"`
	Used       int64  `json:"used"`
	Max        int64  `json:"max"`
}

func decode(e runtime.Event) appliedData {
	var d appliedData
	_ = json.Unmarshal(e.Data, &d)
	return d
}

// checkCommit checks a commit as it lands on top of prev.
func (w *world) checkCommit(prev runtime.Snapshot, c runtime.Commit) {
	post := c.Snapshot
	w.require(prev.Ended == "", "commit after the session ended")
	w.require(post.EventSeq == prev.EventSeq+uint64(len(post.Outbox)), "event seq jumps")
	sc := &scan{w: w, prev: prev, post: post, events: post.Outbox, turn: prev.Turn != nil, done: map[uint64]bool{}, startsIn: map[string]turnStart{}}
	if t := prev.Turn; t != nil {
		sc.turnID, sc.caller = t.ID, t.Caller
	}
	sc.window = prev.Debounce != nil
	tail := w.unprocessed(prev)
	for i := range tail {
		if c := &tail[i]; w.fedAt[c.Seq] && !w.done(prev, c.Seq) && !w.isDup(*c) {
			sc.open = append(sc.open, c)
		}
	}
	var refs []runtime.Ref
	size := 0
	for i, e := range post.Outbox {
		w.require(e.Seq == prev.EventSeq+uint64(i)+1, "event seq not contiguous")
		n, err := validWire(e)
		w.require(err == nil, "event %s does not pass the wire registry: %v", e.Kind, err)
		size += n
		w.require(!sc.ended, "event %s after session.ended", e.Kind)
		if e.Kind == runtime.EventCommandApplied {
			d := decode(e)
			refs = append(refs, runtime.Ref{Seq: d.Seq, ID: d.CommandID})
		}
		sc.event(i, e)
	}
	w.require(slices.Equal(refs, c.Applied), "Commit.Applied %v differs from command.applied %v", c.Applied, refs)
	sc.checkSize(size)
	sc.checkForgotten()
	sc.checkBound()
	sc.checkPriority()
	sc.checkDeferred()
	sc.checkBusy()
}

// slackBytes is what a property-test commit may carry besides its
// admissions: the folded step's few events, a finalization's, and the one
// command that crosses the budget.
const slackBytes = 4 << 10

// checkSize: however many commands were fed, a commit carries what fits
// the boundary's budget and reserve (its outbox, encoded as the driver
// stores it), a turn's inputs stay within their caps, and the whole
// snapshot within the checkpoint limit.
func (sc *scan) checkSize(outbox int) {
	w, post := sc.w, sc.post
	w.require(outbox <= wire.MaxBoundaryBytes+wire.BoundaryReserveBytes+slackBytes,
		"commit outbox of %d events is %d bytes encoded: over the boundary budget", len(post.Outbox), outbox)
	if t := post.Turn; t != nil {
		b, _ := json.Marshal(t.Inputs)
		w.require(len(t.Inputs) <= wire.MaxTurnInputs && len(b) <= wire.MaxTurnInputBytes+len(t.Inputs)+2,
			"turn %s holds %d inputs of %d bytes", t.ID, len(t.Inputs), len(b))
	}
	whole, _ := json.Marshal(post)
	w.require(len(whole) <= wire.MaxCheckpointBytes, "snapshot of %d bytes", len(whole))
}

// checkForgotten: a commit formed after the driver reported deleted
// commands no longer lists them above its lowest unapplied sequence (the
// applied set stays bounded), and lists every other processed one.
func (sc *scan) checkForgotten() {
	above := sc.post.Applied.Above
	for _, s := range sc.w.mustDrop {
		sc.w.require(!slices.Contains(above, s), "deleted command %d still in the applied set", s)
	}
	if len(sc.w.mustDrop) > 0 {
		coverage.add("forgotten")
	}
}

// checkBound: the applied set above Next holds at most its bound plus the
// commands this commit and the one before processed (the deletes a commit
// asks for are reported after the next one formed) — from the third commit
// of a run on, while no delete failed.
func (sc *scan) checkBound() {
	w, n := sc.w, len(sc.post.Applied.Above)
	processed := len(sc.done)
	if max := w.cfg.MaxAppliedAbove; max > 0 && w.landed >= 2 && !w.kept {
		w.require(n <= max+w.lastNew+processed, "the applied set holds %d sequences above %d (bound %d, processed %d + %d)",
			n, sc.post.Applied.Next, max, w.lastNew, processed)
	}
	w.landed, w.lastNew = w.landed+1, processed
}

// checkPriority: the first cancel or reset fed before the boundary formed
// the commit, and not processed before, is applied in it — never deferred
// past the next boundary — unless the session ended first.
func (sc *scan) checkPriority() {
	if sc.post.Ended != "" {
		return
	}
	for _, c := range sc.open {
		if priority(*c) {
			sc.w.require(sc.w.done(sc.post, c.Seq), "%s %d was fed before the boundary and not applied at it", c.Kind, c.Seq)
			return
		}
	}
}

// checkDeferred counts commits that leave fed immediate commands for the
// next boundary (coverage: the generator reaches the budget).
func (sc *scan) checkDeferred() {
	for _, c := range sc.open {
		if !sc.fifo(*c) && !sc.w.done(sc.post, c.Seq) && sc.post.Ended == "" {
			coverage.add("deferred")
			return
		}
	}
}

// immediatesFirst: a FIFO command (a turn's delivery, a steer, compact) is
// admitted only once every immediate command fed before the boundary is
// processed — also the ones a budget left for later (R3); a clear, once
// every one that precedes it in the inbox is.
func (sc *scan) immediatesFirst(x runtime.Command) {
	if sc.caughtUp {
		return
	}
	for _, y := range sc.open {
		if !sc.fifo(*y) && (x.Kind != runtime.KindClear || y.Seq < x.Seq) {
			sc.w.require(sc.processed(y.Seq), "%s %d admitted while immediate %d (%s) waits", x.Kind, x.Seq, y.Seq, y.Kind)
		}
	}
	sc.caughtUp = x.Kind != runtime.KindClear
}

func (sc *scan) event(i int, e runtime.Event) {
	d := decode(e)
	coverage.add(e.Kind)
	switch e.Kind {
	case runtime.EventCommandApplied, runtime.EventWireRejected, runtime.EventCommandRejected, wire.EventCommandSuperseded:
		sc.terminal(e, d)
	}
	switch e.Kind {
	case runtime.EventCommandApplied:
		sc.applied(i, sc.w.cmd(d.Seq))
	case runtime.EventWireRejected:
		sc.immediateOrder(sc.w.cmd(d.Seq))
		sc.done[d.Seq] = true
	case runtime.EventCommandRejected:
		sc.refused(i, d)
	case wire.EventCommandSuperseded:
		sc.superseded(i, d)
	case runtime.EventTurnStarted:
		sc.turnStarted(i, d)
	case runtime.EventTurnCompleted, runtime.EventTurnCancelled:
		sc.turn, sc.turnID, sc.caller = false, "", ""
		if e.Kind == runtime.EventTurnCompleted {
			sc.turnCompleted(i, e, d)
		}
	case wire.EventTurnRolledBack:
		sc.rolledBack(i, d)
	case runtime.EventStepInterrupted:
		sc.stepInterrupted(d)
	case runtime.EventLimitReached:
		sc.limit(i, d)
	case runtime.EventTurnStepRetried:
		sc.stepRetried(d)
	case runtime.EventTurnStep, runtime.EventError:
		key := d.TurnID + "/" + strconv.Itoa(d.Step)
		sc.w.require(!sc.w.steps[key], "step %s committed twice", key)
		sc.w.require(!sc.w.aborted[key], "cancelled step %s was not rolled back", key)
		sc.w.require(!sc.w.skipped[key], "step %s committed after it was interrupted", key)
		sc.w.steps[key] = true
	case runtime.EventSessionEnded:
		sc.w.ends++
		sc.w.require(sc.w.ends == 1 && sc.post.Ended == d.Reason, "finalized twice or inconsistently")
		sc.ended, sc.window = true, false // an end discards the window
	}
}

// stepRetried: a step runs again only for a retryable code, while it is
// uncommitted and the turn's due step, within the policy's retries, one
// attempt after the last in this run (a new run counts from attempt 2).
func (sc *scan) stepRetried(d appliedData) {
	key := d.TurnID + "/" + strconv.Itoa(d.Step)
	w := sc.w
	w.require(runtime.RetryableCode(d.Code), "turn.step_retried with code %q", d.Code)
	w.require(!w.steps[key] && !w.aborted[key], "step %s retried after it was committed or cancelled", key)
	w.require(d.Attempt == w.retried[key]+1 || w.retried[key] == 0 && d.Attempt == 2,
		"step %s retried as attempt %d after attempt %d", key, d.Attempt, w.retried[key])
	w.require(d.Attempt <= w.cfg.Retry.Retries+1, "step %s attempt %d beyond %d retries", key, d.Attempt, w.cfg.Retry.Retries)
	t := sc.post.Turn
	w.require(t != nil && t.ID == d.TurnID && t.Steps == d.Step-1 && t.Open, "step %s retried but not due in the commit", key)
	w.retried[key] = d.Attempt
}

// turnCompleted: a turn's stop reason is limit right after limit.reached,
// error right after the error event of the step that failed it, done
// otherwise; error alone needs data version 3, the others are written at 2.
func (sc *scan) turnCompleted(i int, e runtime.Event, d appliedData) {
	want, v := "done", 2
	if i > 0 {
		switch sc.events[i-1].Kind {
		case runtime.EventLimitReached:
			want = "limit"
		case runtime.EventError:
			want, v = "error", 3
		}
	}
	sc.w.require(e.V == v && d.StopReason == want,
		"turn.completed v%d stopReason %q after %s, want v%d %q", e.V, d.StopReason, sc.events[max(i-1, 0)].Kind, v, want)
}

// limit: limit.reached names a limit of this deployment that was reached,
// and turn.completed follows it.
func (sc *scan) limit(i int, d appliedData) {
	l := sc.w.cfg.Limits
	want := map[string]int64{"steps_per_turn": int64(l.MaxStepsPerTurn), "tokens_per_turn": l.MaxTokensPerTurn,
		"tokens_per_session": l.MaxTokensPerSession}[d.Limit]
	sc.w.require(want > 0 && d.Max == want && d.Used >= d.Max, "limit.reached %s used %d max %d (configured %d)", d.Limit, d.Used, d.Max, want)
	if d.Limit == "tokens_per_session" {
		sc.w.require(sc.post.Usage.Tokens() >= d.Used, "session usage %d below the reported %d", sc.post.Usage.Tokens(), d.Used)
	}
	sc.w.require(i+1 < len(sc.events) && sc.events[i+1].Kind == runtime.EventTurnCompleted, "limit.reached not followed by turn.completed")
}

// refused checks one command.rejected event: it names a command the
// driver refused, with its reason, once, in place of command.applied
// (never as a handoff's skipped trigger), processed in immediate order.
func (sc *scan) refused(i int, d appliedData) {
	w, x := sc.w, sc.w.cmd(d.Seq)
	if x.Refused == "" && w.refusedBusy[x.Seq] {
		x.Refused = wire.RejectBusy // refused by the machine on receipt (R9b)
		coverage.add("busy rejected")
	}
	w.require(x.Refused != "" && x.Rejected == "", "command.rejected for %d (%s %s), which was not refused", x.Seq, x.Kind, w.modes[x.Seq])
	w.require(d.CommandID == x.ID && d.Reason == x.Refused, "command.rejected %s %q, want %s %q", d.CommandID, d.Reason, x.ID, x.Refused)
	w.require(w.firstSeq[x.ID] == x.Seq, "duplicate %s (seq %d) rejected", x.ID, x.Seq)
	w.require(w.refused[x.ID] == 0 && w.applied[x.ID] == 0, "command %s recorded again", x.ID)
	w.require(sc.post.Applied.Has(x.Seq), "rejected %d missing from the record", x.Seq)
	w.refused[x.ID]++
	sc.checkSkip(i, x)
	sc.immediateOrder(x)
	sc.done[x.Seq] = true
}

// applied checks one command.applied event against the rules.
func (sc *scan) applied(i int, x runtime.Command) {
	w := sc.w
	w.require(!declined(x), "declined command %d (%s) applied", x.Seq, x.Kind)
	w.require(w.firstSeq[x.ID] == x.Seq, "duplicate %s (seq %d) applied", x.ID, x.Seq)
	w.require(w.applied[x.ID] == 0, "command %s applied twice", x.ID)
	w.require(sc.post.Applied.Has(x.Seq), "applied %d missing from the record", x.Seq)
	w.require(!w.refusedBusy[x.Seq], "delivery %d applied, but it found the session busy (mode reject)", x.Seq)
	w.require(w.supBy[x.Seq] == 0, "delivery %d applied, but %d superseded it", x.Seq, w.supBy[x.Seq])
	w.applied[x.ID]++
	sc.checkSkip(i, x)
	switch {
	case x.Kind == runtime.KindDeliver:
		sc.immediatesFirst(x)
		sc.delivery(i, x)
	case x.Kind == runtime.KindClear || x.Kind == runtime.KindCompact:
		sc.immediatesFirst(x)
		sc.fifoOrder(x)
		w.fifoApplied(x)
		w.require(!sc.turn, "%s applied while a turn is open", x.Kind)
		w.require(!sc.window, "%s applied while a debounce window is open", x.Kind)
	default:
		sc.immediateOrder(x)
		sc.timeout(i, x)
		if x.Kind == runtime.KindConfigure {
			sc.configured = &x
		}
	}
	sc.done[x.Seq] = true
}

// checkSkip: handoff.skipped precedes exactly the foreign commands that were
// not handed off, with the reason the idle definition gave at receipt.
func (sc *scan) checkSkip(i int, x runtime.Command) {
	w := sc.w
	got := i > 0 && sc.events[i-1].Kind == runtime.EventHandoffSkipped && decode(sc.events[i-1]).Seq == x.Seq
	want, reason := false, ""
	if w.target(x) != "" {
		r, trig := w.triggers[x.Seq]
		if !trig {
			r = w.wantSkip[x.Seq]
		}
		want, reason = r != "", r
	}
	w.require(got == want, "command %d (%s from %s): handoff.skipped=%v, want %v", x.Seq, x.Kind, x.Deployment, got, want)
	if got {
		w.require(decode(sc.events[i-1]).Reason == reason, "skip reason %q, want %q", decode(sc.events[i-1]).Reason, reason)
	}
}

// delivery: a delivery either starts the next turn in FIFO order while no
// turn is live, opens or joins the debounce window in FIFO order (mode
// debounce), rolls back its caller's live turn and starts a fresh one
// (rollback), or joins the live turn of its caller (steer, interrupt).
func (sc *scan) delivery(i int, x runtime.Command) {
	w, t := sc.w, sc.post.Turn
	mode := w.modes[x.Seq]
	w.require(mode != "", "delivery %d applied, never received by this run", x.Seq)
	starts := i+1 < len(sc.events) && sc.events[i+1].Kind == runtime.EventTurnStarted &&
		decode(sc.events[i+1]).CommandID == x.ID
	own := sc.turn && w.binds[x.Seq] == sc.turnID // an interrupt or rollback of the live turn
	switch {
	case !starts && mode == runtime.ModeRollback && own:
		sc.rollsBack(i, x)
		return
	case !starts && mode == runtime.ModeDebounce:
		sc.gathered(x)
		return
	case !starts && mode == runtime.ModeInterrupt && own:
		coverage.add("interrupt joined")
		if t != nil && t.ID == sc.turnID { // not rolled back later in the commit
			w.require(t.Open && slices.ContainsFunc(t.Inputs, func(c runtime.Command) bool { return c.ID == x.ID }),
				"interrupt %d joined turn %s: not open with it among its inputs", x.Seq, t.ID)
		}
		return
	}
	if starts {
		sc.fifoOrder(x)
		w.fifoApplied(x)
		w.require(!sc.turn, "delivery %d started a turn while one is open", x.Seq)
		w.require(mode != runtime.ModeDebounce, "debounce delivery %d started a turn of its own", x.Seq)
		w.require(!sc.window, "delivery %d started a turn while a debounce window is open", x.Seq)
		if i+2 < len(sc.events) && sc.events[i+2].Kind == runtime.EventLimitReached { // no tokens left
			w.require(decode(sc.events[i+2]).Limit == "tokens_per_session", "turn of %d ended at once by %s", x.Seq, decode(sc.events[i+2]).Limit)
			return
		}
		w.require(t != nil && t.Open && len(t.Inputs) == 1 && t.Inputs[0].ID == x.ID, "turn of %d not committed", x.Seq)
		return
	}
	coverage.add("steer joined")
	w.require(mode == runtime.ModeSteer, "queued delivery %d (%s) joined a turn", x.Seq, mode)
	w.require(t != nil && t.Open && t.Caller == x.Caller && !sc.post.Paused, "steer %d joined no open turn of its caller", x.Seq)
	w.require(slices.ContainsFunc(t.Inputs, func(c runtime.Command) bool { return c.ID == x.ID }), "steer %d not in the turn inputs", x.Seq)
}

// fifoOrder: every earlier FIFO-class command was processed before x.
func (sc *scan) fifoOrder(x runtime.Command) {
	for _, y := range sc.open {
		if y.Seq >= x.Seq {
			return
		}
		if sc.fifo(*y) {
			sc.w.require(sc.processed(y.Seq), "FIFO: %d (%s) applied before earlier %d (%s)", x.Seq, x.Kind, y.Seq, y.Kind)
		}
	}
}

// immediateOrder: every earlier immediate-class command was processed
// before x — except that a cancel or reset passes the ones a boundary's
// budget leaves for the next (never another cancel or reset).
func (sc *scan) immediateOrder(x runtime.Command) {
	for _, y := range sc.open {
		if y.Seq >= x.Seq {
			return
		}
		if sc.fifo(*y) || sc.processed(y.Seq) {
			continue
		}
		sc.w.require(priority(x) && !priority(*y), "immediate: %d (%s) applied before earlier %d (%s)", x.Seq, x.Kind, y.Seq, y.Kind)
		coverage.add("priority ahead")
	}
}

// priority: the commands a flood never defers past the next boundary
// (clear is FIFO: it keeps its place behind the immediate commands).
func priority(c runtime.Command) bool {
	return !declined(c) && (c.Kind == runtime.KindCancel || c.Kind == runtime.KindReset)
}

func (sc *scan) processed(seq uint64) bool { return sc.w.done(sc.prev, seq) || sc.done[seq] }

func fifo(c runtime.Command) bool {
	return !declined(c) && (c.Kind == runtime.KindDeliver || c.Kind == runtime.KindClear || c.Kind == runtime.KindCompact)
}

// fifo: x was a FIFO command when the commit formed — not declined by the
// driver, and not refused busy or superseded on receipt by then.
func (sc *scan) fifo(x runtime.Command) bool { return fifo(x) && !sc.w.declinedAt(x, sc.w.fedAt) }

// declined: a command the machine records (wire.rejected, command.rejected)
// and never applies — undecodable, or refused by the driver.
func declined(c runtime.Command) bool { return c.Rejected != "" || c.Refused != "" }

// steers: a steering delivery the machine may join to an open turn.
func steers(c runtime.Command) bool {
	return c.Kind == runtime.KindDeliver && c.Mode == runtime.ModeSteer
}

func (w *world) isDup(c runtime.Command) bool { return w.firstSeq[c.ID] != c.Seq }

func (w *world) cmd(seq uint64) runtime.Command {
	i := slices.IndexFunc(w.stream, func(c runtime.Command) bool { return c.Seq == seq })
	w.require(i >= 0, "unknown sequence %d", seq)
	return w.stream[i]
}

// coverage counts what the property runs reached, so a generator that stops
// reaching a scenario fails the test instead of passing vacuously.
var coverage = &counter{n: map[string]int{}}

type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[k]++
}

func (c *counter) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[k]
}

// wireEvents is the registry the driver validates with: the built-ins plus
// the custom kind the property test's agent emits.
var wireEvents = func() *wire.EventRegistry {
	reg := wire.DefaultEvents()
	if err := wire.RegisterEvent(reg, "x.custom", func(customData) error { return nil }); err != nil {
		panic(err)
	}
	return reg
}()

// validWire checks an event the machine committed against the durable
// boundary's validation (wire), as the driver will on append, and returns
// its encoded size (the envelope with IDs as long as the world's, a time
// with nanoseconds).
func validWire(e runtime.Event) (int, error) {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	b, err := wire.EncodeEvent(wireEvents, wire.Event{SessionID: "s", Seq: e.Seq, Time: time.Unix(1700000000, 123456789).UTC(),
		OwnerRunID: "r1", DeploymentID: "A", Kind: e.Kind, V: max(e.V, 1), Data: data})
	return len(b), err
}

// customData is the data of the property test agent's own event kind.
type customData struct {
	N int `json:"n"`
}
