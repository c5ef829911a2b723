package handoff_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/baton-rt/baton/internal/failpoint"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/session/memory"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
)

// The scenario harness: one session owned by a source on deployment
// "blue", one handoff attempt to "green" with faults injected at named
// crash points, then crash recovery (an adopter claims a session whose
// owner is dead), then the checks every scenario must pass. It runs the
// real executor and the real Activate against a backend: the in-memory
// store or kv over an embedded nats-server.

const (
	srcDeployment  = "blue"
	candDeployment = "green"
	srcRun         = "src-run"
	candRun        = "cand-run"
	adoptRun       = "adopt-run"
)

var errCrash = errors.New("crash (injected)")

// tb is what the harness needs of a *testing.T or a *rapid.T.
type tb interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// testStore is what the harness needs of a backend's store.
type testStore interface {
	handoff.Store
	handoff.Reader
	CreateSession(ctx context.Context, rec record.SessionRecord) (uint64, error)
}

type backend struct {
	name    string
	store   testStore
	backlog handoff.Backlog
	publish func(t tb, token string) uint64
	holds   func(t tb, seq uint64) bool
}

func memBackend() *backend {
	inbox := newMemInbox()
	return &backend{
		name: "mem", store: memory.NewRecords(), backlog: inbox,
		publish: func(_ tb, tok string) uint64 { return inbox.publish(tok) },
		holds:   func(_ tb, seq uint64) bool { return inbox.holds(seq) },
	}
}

type side string

const (
	onSource    side = "source"
	onCandidate side = "candidate"
)

// point is a crash point: before or after one step of one side.
type point struct {
	side  side
	step  handoff.Step
	after bool
}

func (p point) String() string {
	when := "before"
	if p.after {
		when = "after"
	}
	return fmt.Sprintf("%s/%s/%s", p.side, when, p.step)
}

var (
	sourceSteps    = []handoff.Step{handoff.StepStage, handoff.StepMark, handoff.StepCheckBacklog, handoff.StepStart, handoff.StepConfirm, handoff.StepReclaim, handoff.StepCleanup}
	candidateSteps = []handoff.Step{handoff.StepLoad, handoff.StepVerify, handoff.StepValidate, handoff.StepActivate, handoff.StepUnmark}
)

func allPoints() []point {
	var ps []point
	for _, s := range sourceSteps {
		ps = append(ps, point{onSource, s, false}, point{onSource, s, true})
	}
	for _, s := range candidateSteps {
		ps = append(ps, point{onCandidate, s, false}, point{onCandidate, s, true})
	}
	return ps
}

// fault is what happens at a crash point.
type fault int

const (
	fNone      fault = iota
	fCrash           // the side's process dies there
	fStall           // the side pauses past the other side's timeout (source: its lease expires and it is adopted; candidate: the start times out) and resumes
	fCommand         // a new command arrives on the session's alias
	fLate            // the source is cut off there and tries to commit after everything settled
	fReplyLost       // (after a write) the write landed, its reply is lost
)

var faultNames = [...]string{"none", "crash", "stall", "new-command", "late-commit", "reply-lost"}

func (f fault) String() string { return faultNames[f] }

// mode is the candidate's behaviour when nothing is injected.
type mode int

const (
	modeOK           mode = iota
	modeUnreadable        // the checkpoint has a state version the candidate cannot read
	modeNoResponders      // nobody serves the target's start subject
)

var modeNames = [...]string{"ok", "unreadable", "no-responders"}

func (m mode) String() string { return modeNames[m] }

var sessionSeq atomic.Uint64

// scenario is one handoff attempt under faults.
type scenario struct {
	t      tb
	b      *backend
	faults map[point]fault
	mode   mode

	id       string
	alias    string
	req      handoff.Request
	trigger  uint64
	original []byte // the checkpoint

	srcView, candView *view

	mu        sync.Mutex
	fired     []string
	extra     []uint64
	cutSource bool
	stalled   chan struct{}
	release   chan struct{}
	didStall  bool
	// srcStalled: the source's lease expired during a stall, so it has
	// self-fenced: it runs nothing more for the session whatever Run said.
	srcStalled bool
	candRes    chan candResult
	cand       *candResult
	adopter    *holder
	res        handoff.Result
	err        error
	final      record.Session // the record after the attempt and recovery, before check's own commit
}

type candResult struct {
	act handoff.Activation
	err error
}

// holder is a party that claimed the record by CAS.
type holder struct {
	run string
	rev uint64
	rec record.SessionRecord
}

func newScenario(t tb, b *backend, m mode, faults map[point]fault) *scenario {
	sc := &scenario{t: t, b: b, mode: m, faults: faults, stalled: make(chan struct{}), release: make(chan struct{})}
	sc.id = fmt.Sprintf("s%d-%d", time.Now().UnixNano()%1_000_000, sessionSeq.Add(1))
	sc.alias = "al-" + sc.id
	sc.srcView = &view{testStore: b.store, run: srcRun}
	sc.candView = &view{testStore: b.store, run: candRun}
	sc.setup()
	return sc
}

func (sc *scenario) ctx() context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	sc.t.Cleanup(cancel)
	return c
}

func (sc *scenario) setup() {
	sc.trigger = sc.b.publish(sc.t, sc.id)
	sc.original = checkpoint(sc.t, sc.id, sc.mode == modeUnreadable)
	rec := record.SessionRecord{
		SessionID: sc.id, OwnerRunID: srcRun, DeploymentID: srcDeployment, Epoch: 3, OwnerProcess: "p-blue",
		State: record.StateActive, Consumer: subjects.Consumer(sc.id, 3), WireV: 1, Writer: srcRun, WriteCounter: 7,
		Checkpoint: sc.original,
	}
	rev, err := sc.b.store.CreateSession(sc.ctx(), rec)
	if err != nil {
		sc.t.Fatalf("create session: %v", err)
	}
	sc.srcView.note(rec, rev)
	sc.req = handoff.Request{
		HandoffID: "ho-" + sc.id, SessionID: sc.id, SourceRun: srcRun, Source: srcDeployment, Target: candDeployment,
		Trigger: handoff.Trigger{CommandID: "cmd-1", Seq: sc.trigger},
		Tokens:  []string{sc.id, sc.alias},
		Record:  record.Session{Record: rec, Revision: rev},
	}
}

// checkpoint is a wire checkpoint; unreadable gives it a future state
// version, which DecodeCheckpoint refuses.
func checkpoint(t tb, id string, unreadable bool) []byte {
	b, err := wire.EncodeCheckpoint(wire.Checkpoint{SessionID: id, Tokens: []string{id}, Applied: wire.Applied{Low: 1}})
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if unreadable {
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%v", err)
		}
		doc["stateV"] = wire.CurrentStateVersion + 1
		b, _ = json.Marshal(doc)
	}
	return b
}

func validate(b []byte) error {
	_, err := wire.DecodeCheckpoint(b)
	return err
}

func (sc *scenario) faultAt(p point) fault {
	f := sc.faults[p]
	if f == fReplyLost && !p.after {
		f = fNone
	}
	if f != fNone {
		sc.mu.Lock()
		sc.fired = append(sc.fired, p.String()+"="+f.String())
		sc.mu.Unlock()
	}
	return f
}

func (sc *scenario) txn() handoff.Txn {
	return handoff.Txn{
		Store: sc.srcView, Starter: sc, Backlog: sc.b.backlog,
		Failpoints: stepPoints(failpoint.HandoffSourceBefore, failpoint.HandoffSourceAfter, sc.sourceHook(false), sc.sourceHook(true)),
	}
}

func (sc *scenario) sourceHook(after bool) func(handoff.Step) error {
	return func(s handoff.Step) error {
		if sc.isCut() {
			return errCrash
		}
		switch sc.faultAt(point{onSource, s, after}) {
		case fCrash, fLate:
			return errCrash
		case fStall:
			sc.mu.Lock()
			sc.srcStalled = true
			sc.mu.Unlock()
			sc.adoptIfOwnedBy(srcRun)
		case fCommand:
			sc.publishExtra()
		case fReplyLost:
			return handoff.ErrReplyLost
		}
		return nil
	}
}

func (sc *scenario) candidateHook(after bool) func(handoff.Step) error {
	return func(s handoff.Step) error {
		switch sc.faultAt(point{onCandidate, s, after}) {
		case fCrash:
			return errCrash
		case fStall:
			sc.stall()
		case fCommand:
			sc.publishExtra()
		case fLate:
			sc.mu.Lock()
			sc.cutSource = true
			sc.mu.Unlock()
		case fReplyLost:
			return handoff.ErrReplyLost
		}
		return nil
	}
}

func (sc *scenario) isCut() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.cutSource
}

// stall blocks the candidate until the source's transaction is over (the
// source sees its start time out meanwhile). Only the first stall counts.
func (sc *scenario) stall() {
	sc.mu.Lock()
	first := !sc.didStall
	sc.didStall = true
	sc.mu.Unlock()
	if first {
		close(sc.stalled)
		<-sc.release
	}
}

func (sc *scenario) publishExtra() {
	seq := sc.b.publish(sc.t, sc.alias)
	sc.mu.Lock()
	sc.extra = append(sc.extra, seq)
	sc.mu.Unlock()
}

func (sc *scenario) candidate() handoff.Candidate {
	return handoff.Candidate{
		Deployment: candDeployment, ProcessID: "p-green", RunID: candRun, WireV: 1, Validate: validate,
		Failpoints: stepPoints(failpoint.HandoffCandidateBefore, failpoint.HandoffCandidateAfter, sc.candidateHook(false), sc.candidateHook(true)),
	}
}

// Start is the in-process Starter: the candidate activates in its own
// goroutine; a crash of it, or a stall, is a start that times out.
func (sc *scenario) Start(_ context.Context, req protocol.HandoffStart) (protocol.HandoffStartReply, error) {
	if sc.mode == modeNoResponders {
		return protocol.HandoffStartReply{}, fmt.Errorf("%w: (test)", handoff.ErrNoResponders)
	}
	res := make(chan candResult, 1)
	sc.candRes = res
	go func() {
		act, err := handoff.Activate(sc.ctx(), sc.candView, handoff.ActivateRequestFrom(req), sc.candidate())
		res <- candResult{act, err}
	}()
	select {
	case r := <-res:
		sc.cand = &r
		if errors.Is(r.err, errCrash) {
			return protocol.HandoffStartReply{}, context.DeadlineExceeded
		}
		return handoff.Reply(req, r.act, r.err), nil
	case <-sc.stalled:
		return protocol.HandoffStartReply{}, context.DeadlineExceeded
	}
}

// run performs the attempt, lets a stalled candidate finish, and recovers a
// session whose owner is dead.
func (sc *scenario) run() *scenario {
	sc.res, sc.err = sc.txn().Run(sc.ctx(), sc.req)
	if sc.candRes != nil && sc.cand == nil {
		close(sc.release)
		r := <-sc.candRes
		sc.cand = &r
	}
	cur := sc.leader()
	if !sc.live(cur.Record.OwnerRunID) {
		sc.adopt(cur)
	}
	return sc
}

func (sc *scenario) leader() record.Session {
	s, err := sc.b.store.LeaderSession(sc.ctx(), sc.id)
	if err != nil {
		sc.t.Fatalf("%s: leader read: %v", sc, err)
	}
	return s
}

func (sc *scenario) sourceLive() bool {
	return sc.err == nil && sc.res.Outcome == handoff.Kept && !sc.srcStalled
}

func (sc *scenario) candidateLive() bool {
	return sc.cand != nil && sc.cand.err == nil && !sc.cand.act.Replayed
}

func (sc *scenario) live(run string) bool {
	switch run {
	case srcRun:
		return sc.sourceLive()
	case candRun:
		return sc.candidateLive()
	case adoptRun:
		return sc.adopter != nil
	}
	return false
}

// adoptIfOwnedBy is crash recovery during a stall: the run's process lease
// expired, so an adopter claims the session if that run still owns it.
func (sc *scenario) adoptIfOwnedBy(run string) {
	if cur := sc.leader(); cur.Record.OwnerRunID == run {
		sc.adopt(cur)
	}
}

// adopt claims the record as the driver's crash recovery does: leader
// read, CAS at that revision with epoch+1 (a staged record becomes active
// through handoff.Adopt), then handoff.Clean.
func (sc *scenario) adopt(cur record.Session) {
	rec := record.Adopt(cur.Record)
	rec.Epoch++
	rec.OwnerRunID, rec.OwnerProcess = adoptRun, "p-adopter"
	rec.Consumer = subjects.Consumer(sc.id, rec.Epoch)
	rec.Writer, rec.WriteCounter = adoptRun, 0
	rev, err := sc.b.store.UpdateSession(sc.ctx(), rec, cur.Revision)
	if err != nil {
		sc.t.Fatalf("%s: adoption at %d: %v", sc, cur.Revision, err)
	}
	sc.adopter = &holder{run: adoptRun, rev: rev, rec: rec}
	if _, err := handoff.Clean(sc.ctx(), sc.b.store, sc.id); err != nil {
		sc.t.Fatalf("%s: clean after adoption: %v", sc, err)
	}
}

func (sc *scenario) String() string {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return fmt.Sprintf("[%s mode=%s faults=%s result=%s/%v err=%v steps=%v]",
		sc.b.name, sc.mode, strings.Join(sc.fired, ","), sc.res.Outcome, sc.res.Failure, sc.err, sc.res.Steps)
}

// stepPoints arms a transaction's (or an activation's) before and after
// failpoints with functions of the step (nil: not armed).
func stepPoints(before, after failpoint.Name, onBefore, onAfter func(handoff.Step) error) *failpoint.Registry {
	step := func(f func(handoff.Step) error) failpoint.Action {
		if f == nil {
			return nil
		}
		return func(a failpoint.Args) error { return f(handoff.Step(a.Detail)) }
	}
	return failpoint.New().On(before, step(onBefore)).On(after, step(onAfter))
}
