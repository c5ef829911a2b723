package runtime_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
	"pgregory.net/rapid"
)

// TestChildProperties drives a parent session with random steps that
// delegate to and close handles, random child results (right and stale),
// child waits, cancel, reset, clear, handoff triggers, crashes (rebuilt
// from the last commit, sometimes through JSON) and handoff successors, and
// checks the handle invariants at every landed commit and after every
// action.
//
// It runs 300 cases: the rarest labels (a pending send that left, one that
// failed unavailable) come a few times in a hundred, and every label must
// be reached. Under the race detector it runs 60 and checks no label
// (testsize.PickRaced: make test runs the 300 without it).
func TestChildProperties(t *testing.T) {
	setFlag(t, "rapid.checks", strconv.Itoa(testsize.PickRaced(300, 60, 300)))
	rapid.Check(t, func(t *rapid.T) {
		w := newCWorld(t)
		acts, n := cActions, rapid.IntRange(30, 300).Draw(t, "actions")
		if w.wide {
			acts, n = wideActions, 400
		}
		for range n {
			if w.m.Ended() != "" {
				break
			}
			w.act(rapid.SampledFrom(acts).Draw(t, "action"))
			w.checkIdle()
			for w.pending != nil && rapid.IntRange(0, 3).Draw(t, "land") > 0 {
				w.commitDone()
				w.checkIdle()
			}
		}
		w.drain()
		cCoverage.add("runs")
	})
	if !testsize.FullSample() {
		return // make test's pass without the race detector checks the coverage of its 300 runs
	}
	for _, k := range []string{runtime.EventChildStarted, runtime.EventChildCompleted, runtime.EventChildWaiting,
		runtime.EventChildClosed, "handoff", "moved", "crash", "json", "handle_busy", "handle_limit", "32 open", "stale", "skip child",
		"pending", "left", "unavailable", "pending settled"} {
		if cCoverage.get(k) == 0 {
			t.Errorf("no run reached %q", k)
		}
		t.Logf("%-16s %d", k, cCoverage.get(k))
	}
}

var cCoverage = &counter{n: map[string]int{}}

var cActions = []string{
	"deliver", "deliver", "foreign", "step", "step", "step", "step", "commit", "commit", "commit", "commit",
	"result", "result", "result", "stale", "waiting", "resumed", "answer", "cancel", "reset", "clear",
	"handoff", "handoff", "crash", "pendsend", "pendsend", "left", "left", "left", "unavailable",
}

// wideActions fan out: mostly steps, which delegate to new names.
var wideActions = []string{"deliver", "step", "step", "step", "step", "commit", "result", "stale", "foreign", "handoff", "crash", "pendsend"}

// cworld plays the driver, the children and the inbox for one parent.
type cworld struct {
	t           *rapid.T
	cfg         runtime.Config
	m           *runtime.Machine
	runs        int
	now         time.Time
	names       []string // the handle alphabet
	wide        bool     // many names, few closes: up to the handle limit
	stream      []runtime.Command
	committed   runtime.Snapshot
	pending     *runtime.Commit
	step        *runtime.RunStep
	handoff     *runtime.Handoff
	maxGen      map[string]int      // the highest committed generation of each name
	childIDs    map[string]string   // child session ID → "name.gen" it was committed under
	completed   map[string]int      // delegation command ID → committed child.completed
	delegations map[string][]string // handle → its committed delegations' command IDs
	left        map[string]bool     // pending sends the driver reported left
}

func newCWorld(t *rapid.T) *cworld {
	w := &cworld{t: t, now: epoch, maxGen: map[string]int{}, childIDs: map[string]string{}, completed: map[string]int{}, delegations: map[string][]string{},
		left: map[string]bool{}}
	w.cfg = runtime.Config{SessionID: "p", Deployment: "A"}
	w.names = []string{"a", "b", "c", "d"}
	if rapid.IntRange(0, 4).Draw(t, "wide") == 0 { // enough names to reach the handle limit
		w.names, w.wide = nil, true
		for i := range wire.MaxHandles + 8 {
			w.names = append(w.names, "h"+strconv.Itoa(i))
		}
	}
	w.boot(runtime.Boot{Reason: runtime.BootNew})
	return w
}

func (w *cworld) require(ok bool, format string, args ...any) {
	if !ok {
		w.t.Helper()
		w.t.Fatalf(format, args...)
	}
}

// boot starts a new owner run from the committed snapshot and replays the
// stream from Applied.Next, checking that the handles survived.
func (w *cworld) boot(b runtime.Boot) {
	w.runs++
	w.cfg.RunID = "r" + strconv.Itoa(w.runs)
	m, err := runtime.NewMachine(w.cfg, w.committed)
	if err != nil {
		w.t.Fatalf("NewMachine: %v", err)
	}
	w.m, w.pending, w.step, w.handoff = m, nil, nil, nil
	b.Now = w.now
	effs := w.handle(b)
	// (b) the handles a new owner starts from are the committed ones.
	w.require(reflect.DeepEqual(w.m.Snapshot().Handles, w.committed.Handles), "boot %s: handles %+v, committed %+v",
		b.Reason, w.m.Snapshot().Handles, w.committed.Handles)
	if unsent := unpending(w.committed); len(unsent) > 0 {
		i := slices.IndexFunc(effs, func(e runtime.Effect) bool { _, ok := e.(runtime.SendCommands); return ok })
		w.require(i >= 0 && reflect.DeepEqual(effs[i].(runtime.SendCommands).Sends, unsent),
			"boot %s does not re-send the committed sends", b.Reason)
	}
	w.require(reflect.DeepEqual(w.m.PendingSends(), w.committed.PendingSends), "boot %s: pending %+v, committed %+v",
		b.Reason, w.m.PendingSends(), w.committed.PendingSends)
	for _, c := range w.stream {
		if c.Seq >= w.committed.Applied.Next && w.m.Ended() == "" && !w.m.Stopped() {
			w.handle(runtime.Received{Cmd: c})
		}
	}
}

func (w *cworld) handle(in runtime.Input) []runtime.Effect {
	effs, err := w.m.Handle(in)
	if err != nil {
		w.t.Fatalf("Handle(%T): %v", in, err)
	}
	for _, e := range effs {
		switch e := e.(type) {
		case runtime.Commit:
			w.require(w.pending == nil, "two commits in flight")
			w.pending = &e
		case runtime.RunStep:
			w.step = &e
		case runtime.Handoff:
			w.onHandoff(e)
		}
	}
	return effs
}

// onHandoff: (c) a session hands off only with no active handle and no
// outstanding child wait.
func (w *cworld) onHandoff(h runtime.Handoff) {
	s := w.m.Snapshot()
	w.require(activeChildren(s) == 0, "handoff with active children: %+v %+v", s.Handles, s.ChildWaits)
	w.handoff = &h
	cCoverage.add("handoff")
}

func activeChildren(s runtime.Snapshot) int {
	n := len(s.ChildWaits)
	for _, h := range s.Handles {
		if h.State == wire.HandleActive {
			n++
		}
	}
	return n
}

func openHandles(s runtime.Snapshot) int {
	n := 0
	for _, h := range s.Handles {
		if h.State != wire.HandleClosed {
			n++
		}
	}
	return n
}

// checkIdle is (c): never idle while a child keeps the session busy, and
// the reason is child unless a wait of the session itself comes first.
func (w *cworld) checkIdle() {
	if w.m.Stopped() || w.m.Ended() != "" {
		return
	}
	s, r := w.m.Snapshot(), w.m.IdleReason()
	if activeChildren(s) == 0 {
		return
	}
	w.require(r != "", "idle with active children: %+v %+v", s.Handles, s.ChildWaits)
	if !s.Paused && s.Waits.Input == nil && s.Waits.Auth == nil && len(s.Waits.Tasks) == 0 {
		w.require(r == runtime.SkipChild, "IdleReason %q with active children and no wait of its own", r)
	}
}

func (w *cworld) recv(k runtime.Kind, set func(*runtime.Command)) {
	seq := uint64(len(w.stream) + 1)
	c := runtime.Command{Seq: seq, ID: "c" + strconv.FormatUint(seq, 10), Kind: k, Deployment: w.cfg.Deployment}
	if set != nil {
		set(&c)
	}
	w.stream = append(w.stream, c)
	w.handle(runtime.Received{Cmd: c})
}

func (w *cworld) act(a string) {
	switch {
	case a == "deliver":
		w.recv(runtime.KindDeliver, func(c *runtime.Command) { c.Text = "go" })
	case a == "foreign":
		w.foreign()
	case a == "step" && w.step != nil:
		w.stepDone(w.genResult())
	case a == "commit" && w.pending != nil:
		w.commitDone()
	case a == "result" || a == "stale":
		w.childResult(a == "stale")
	case a == "waiting" || a == "resumed":
		w.childWait(a == "resumed")
	case a == "answer" && w.committed.Waits.Input != nil:
		id := w.committed.Waits.Input.RequestID
		w.recv(runtime.KindInputResponse, func(c *runtime.Command) { c.RequestID, c.Value = id, json.RawMessage(`"ok"`) })
	case a == "cancel":
		w.recv(runtime.KindCancel, nil)
	case a == "reset" && !w.wide && rapid.IntRange(0, 2).Draw(w.t, "reset") == 0:
		w.recv(runtime.KindReset, nil)
	case a == "clear" && !w.wide && rapid.IntRange(0, 2).Draw(w.t, "clear") == 0:
		w.recv(runtime.KindClear, nil)
	case a == "handoff" && w.handoff != nil:
		w.handoffDone(rapid.Bool().Draw(w.t, "moved"))
	case a == "crash" && rapid.IntRange(0, 2).Draw(w.t, "crash") == 0:
		w.crash(rapid.Bool().Draw(w.t, "viaJSON"))
	case a == "pendsend" || a == "left" || a == "unavailable":
		w.pendingAct(a)
	}
}

// foreign delivers from another deployment: a handoff trigger.
func (w *cworld) foreign() {
	to := "B"
	if w.cfg.Deployment == "B" {
		to = "A"
	}
	if activeChildren(w.m.Snapshot()) > 0 {
		cCoverage.add("skip child")
	}
	w.recv(runtime.KindDeliver, func(c *runtime.Command) { c.Text, c.Deployment = "hop", to })
}

func (w *cworld) name() string { return rapid.SampledFrom(w.names).Draw(w.t, "handle") }

// fresh is a name with no open handle, if any is left (else any name).
func (w *cworld) fresh() string {
	s := w.m.Snapshot()
	for _, n := range w.names {
		i := slices.IndexFunc(s.Handles, func(h runtime.Handle) bool { return h.Handle == n })
		if i < 0 || s.Handles[i].State == wire.HandleClosed {
			return n
		}
	}
	return w.name()
}

func (w *cworld) genResult() runtime.StepResult {
	r := runtime.StepResult{Outcome: rapid.SampledFrom([]runtime.Outcome{
		runtime.OutcomeContinue, runtime.OutcomeContinue, runtime.OutcomeDone, runtime.OutcomeDone, runtime.OutcomeInput,
	}).Draw(w.t, "outcome")}
	if rapid.IntRange(0, 40).Draw(w.t, "finish") == 0 {
		r.Outcome = runtime.OutcomeFinish
	}
	if w.wide {
		r.Outcome = runtime.OutcomeContinue
		r.Delegate = &runtime.Delegate{Handle: w.fresh(), Text: "job"}
		return r
	}
	if rapid.IntRange(0, 2).Draw(w.t, "delegate") > 0 {
		r.Delegate = &runtime.Delegate{Handle: w.name(), Text: "job", Wait: rapid.Bool().Draw(w.t, "wait")}
	}
	if !w.wide && rapid.IntRange(0, 5).Draw(w.t, "close") == 0 {
		r.Close = []string{w.name()}
	}
	if rapid.IntRange(0, 15).Draw(w.t, "fail") == 0 {
		r.Error = "boom"
	}
	return r
}

func (w *cworld) stepDone(r runtime.StepResult) {
	in := w.step.Input
	w.step = nil
	w.handle(runtime.StepDone{TurnID: in.TurnID, Step: in.Step, Result: r})
}

// childResult sends a child.result for a random name: with the committed
// delegation's command ID (a child only learns it from a committed send),
// or a stale one.
func (w *cworld) childResult(stale bool) {
	name := w.name()
	var active []string
	for _, h := range w.committed.Handles {
		if h.State == wire.HandleActive {
			active = append(active, h.Handle)
		}
	}
	if len(active) > 0 && rapid.IntRange(0, 3).Draw(w.t, "pickActive") > 0 {
		name = rapid.SampledFrom(active).Draw(w.t, "activeHandle")
	}
	i := slices.IndexFunc(w.committed.Handles, func(h runtime.Handle) bool { return h.Handle == name })
	ref := &wire.ChildRef{Handle: name, SessionID: wire.ChildSessionID("p", name, 1), TurnID: "t1", Outcome: wire.ChildDone,
		Outputs: []string{"out"}}
	if i >= 0 {
		h := w.committed.Handles[i]
		ref.SessionID, ref.CommandID = h.ChildSessionID, h.CommandID
	}
	if stale || ref.CommandID == "" {
		ref.CommandID = w.staleID(name)
		cCoverage.add("stale")
	}
	if rapid.IntRange(0, 6).Draw(w.t, "ended") == 0 {
		ref.Ended = runtime.EndDone
	}
	w.recv(runtime.KindChildResult, func(c *runtime.Command) { c.Child = ref })
}

// staleID is a command ID that answers no live delegation of name: an
// earlier delegation's (a repeated result) or one never sent. (An ID a
// future step's delegation will get is not stale: no child can know it.)
func (w *cworld) staleID(name string) string {
	if past := w.delegations[name]; len(past) > 0 && rapid.Bool().Draw(w.t, "repeat") {
		return rapid.SampledFrom(past).Draw(w.t, "pastID")
	}
	return "p/none/" + strconv.Itoa(rapid.IntRange(0, 3).Draw(w.t, "staleN"))
}

func (w *cworld) childWait(resumed bool) {
	name := w.name()
	req := rapid.SampledFrom([]string{"q1", "q2"}).Draw(w.t, "request")
	k := runtime.KindChildWaiting
	if resumed {
		k = runtime.KindChildResumed
	}
	ref := &wire.ChildRef{Handle: name, SessionID: wire.ChildSessionID("p", name, max(1, w.maxGen[name])), Question: "?"}
	w.recv(k, func(c *runtime.Command) { c.Child, c.RequestID = ref, req })
}

// commitDone lands the pending commit after checking it against the last.
func (w *cworld) commitDone() {
	c := *w.pending
	w.checkCommit(w.committed, c.Snapshot)
	w.committed, w.pending = c.Snapshot, nil
	w.handle(runtime.CommitDone{Outcome: runtime.CommitOK})
}

// checkCommit is (a), (d) and (e) for one landed commit.
func (w *cworld) checkCommit(prev, post runtime.Snapshot) {
	seen := map[string]bool{}
	for _, h := range post.Handles {
		w.require(!seen[h.Handle], "handle %q twice: %+v", h.Handle, post.Handles)
		seen[h.Handle] = true
		w.require(h.Generation >= 1 && h.ChildSessionID == wire.ChildSessionID("p", h.Handle, h.Generation),
			"handle %+v: child ID is not derived from its generation", h)
		key := h.Handle + "." + strconv.Itoa(h.Generation)
		if k, ok := w.childIDs[h.ChildSessionID]; ok {
			w.require(k == key, "child %s reused: %s then %s", h.ChildSessionID, k, key)
		} else {
			w.require(h.Generation > w.maxGen[h.Handle], "handle %q: new child at generation %d after %d", h.Handle, h.Generation, w.maxGen[h.Handle])
			w.childIDs[h.ChildSessionID] = key
			w.maxGen[h.Handle] = h.Generation
		}
		w.require(h.State != wire.HandleActive || h.CommandID != "", "active handle %+v without its delegation", h)
		if h.State == wire.HandleActive && !slices.Contains(w.delegations[h.Handle], h.CommandID) {
			w.delegations[h.Handle] = append(w.delegations[h.Handle], h.CommandID)
		}
	}
	for _, h := range prev.Handles {
		i := slices.IndexFunc(post.Handles, func(o runtime.Handle) bool { return o.Handle == h.Handle })
		w.require(i >= 0, "handle %q lost: %+v -> %+v", h.Handle, prev.Handles, post.Handles)
		o := post.Handles[i]
		switch {
		case h.State != wire.HandleClosed:
			w.require(o.Generation == h.Generation && o.ChildSessionID == h.ChildSessionID,
				"open handle %+v changed child to %+v", h, o)
		case o.State != wire.HandleClosed: // a closed name reused: a new child
			w.require(o.Generation > h.Generation, "closed handle %+v reopened as %+v", h, o)
		}
	}
	w.checkSends(prev, post)
	w.checkPending(prev, post)
	w.require(openHandles(post) <= wire.MaxHandles, "%d open handles", openHandles(post))
	if openHandles(post) == wire.MaxHandles {
		cCoverage.add("32 open")
	}
	for _, e := range post.Outbox {
		cCoverage.add(e.Kind)
		_, err := validWire(e)
		w.require(err == nil, "event %s: %v", e.Kind, err)
		switch e.Kind {
		case runtime.EventChildCompleted:
			w.completedEvent(prev, e)
		case runtime.EventCommandApplied:
			var d wire.CommandApplied
			_ = json.Unmarshal(e.Data, &d)
			k := runtime.Kind(d.Kind)
			w.require((k != runtime.KindReset && k != runtime.KindClear) || openHandles(post) == 0,
				"%s applied, %d handles stay open: %+v", k, openHandles(post), post.Handles)
		case runtime.EventError:
			var d wire.ErrorData
			_ = json.Unmarshal(e.Data, &d)
			cCoverage.add(d.Code)
		}
	}
}

// checkSends: a commit that delegates sends the delivery to the handle's
// child, and one that closes a handle (not closed by its child's end) sends
// it end.
func (w *cworld) checkSends(prev, post runtime.Snapshot) {
	sent := func(k runtime.Kind, to, id string) bool {
		return slices.ContainsFunc(post.Sends, func(s runtime.Send) bool {
			return s.Command.Kind == k && s.SessionID == to && (id == "" || s.Command.ID == id)
		})
	}
	for _, o := range post.Handles {
		i := slices.IndexFunc(prev.Handles, func(h runtime.Handle) bool { return h.Handle == o.Handle })
		var h runtime.Handle
		if i >= 0 {
			h = prev.Handles[i]
		}
		if o.State == wire.HandleActive && o.CommandID != h.CommandID {
			w.require(sent(runtime.KindDeliver, o.ChildSessionID, o.CommandID), "delegation %s of %q not sent: %+v", o.CommandID, o.Handle, post.Sends)
		}
		if i >= 0 && h.State != wire.HandleClosed && o.State == wire.HandleClosed && !w.endedByChild(post, o.Handle) {
			w.require(sent(runtime.KindEnd, h.ChildSessionID, ""), "handle %q closed without end: %+v", o.Handle, post.Sends)
		}
	}
}

// endedByChild reports whether the commit applied a child.result with
// Ended for handle: that child is gone, and is sent nothing.
func (w *cworld) endedByChild(post runtime.Snapshot, handle string) bool {
	for _, e := range post.Outbox {
		if e.Kind != runtime.EventCommandApplied {
			continue
		}
		var d wire.CommandApplied
		_ = json.Unmarshal(e.Data, &d)
		c := w.stream[d.Seq-1]
		if c.Kind == runtime.KindChildResult && c.Child.Handle == handle && c.Child.Ended != "" {
			return true
		}
	}
	return false
}

// completedEvent is (d): child.completed only for a handle the last commit
// held active, once per delegation.
func (w *cworld) completedEvent(prev runtime.Snapshot, e runtime.Event) {
	var d wire.ChildCompleted
	_ = json.Unmarshal(e.Data, &d)
	i := slices.IndexFunc(prev.Handles, func(h runtime.Handle) bool { return h.Handle == d.Handle })
	w.require(i >= 0 && prev.Handles[i].State == wire.HandleActive, "child.completed for %q, not active before", d.Handle)
	id := prev.Handles[i].CommandID
	w.completed[id]++
	w.require(w.completed[id] == 1, "delegation %s completed %d times", id, w.completed[id])
}

// handoffDone answers the pending handoff: skipped, or moved (a successor
// on the target boots from the committed snapshot).
func (w *cworld) handoffDone(moved bool) {
	h := *w.handoff
	w.handoff = nil
	id := "h" + strconv.Itoa(w.runs)
	if !moved {
		w.handle(runtime.HandoffDone{SkipReason: runtime.SkipQueued, HandoffID: id})
		return
	}
	cCoverage.add("moved")
	w.handle(runtime.HandoffDone{Moved: true, HandoffID: id})
	w.require(w.m.Stopped(), "machine runs on after a handoff")
	from := w.cfg.Deployment
	w.cfg.Deployment = h.Target
	w.boot(runtime.Boot{Reason: runtime.BootHandoff, Handoff: &runtime.HandoffInfo{
		ID: id, From: from, Trigger: runtime.Ref{Seq: h.Trigger.Seq, ID: h.Trigger.ID}, Epoch: uint64(w.runs + 1),
	}})
}

// crash drops everything uncommitted and recovers from the last commit,
// through its JSON form when viaJSON.
func (w *cworld) crash(viaJSON bool) {
	cCoverage.add("crash")
	if viaJSON {
		cCoverage.add("json")
		b, err := json.Marshal(w.committed)
		w.require(err == nil, "marshal: %v", err)
		var s runtime.Snapshot
		w.require(json.Unmarshal(b, &s) == nil, "unmarshal")
		w.require(reflect.DeepEqual(s.Handles, w.committed.Handles) && reflect.DeepEqual(s.ChildWaits, w.committed.ChildWaits) &&
			reflect.DeepEqual(s.PendingSends, w.committed.PendingSends),
			"handles change through JSON: %+v -> %+v", w.committed.Handles, s.Handles)
		w.committed = s
	}
	w.boot(runtime.Boot{Reason: runtime.BootRecover})
}

// drain settles everything: no step, commit or handoff is left.
func (w *cworld) drain() {
	for i := 0; i < 500; i++ {
		switch {
		case w.handoff != nil:
			w.handoffDone(false)
		case w.pending != nil:
			w.commitDone()
		case w.step != nil:
			w.stepDone(runtime.StepResult{Outcome: runtime.OutcomeDone})
		default:
			return
		}
		w.checkIdle()
	}
	w.t.Fatalf("drain did not settle")
}
