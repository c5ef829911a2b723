package handoff_test

import (
	"testing"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/record"
	"pgregory.net/rapid"
)

type H = handoff.Step

func ok(rev uint64) handoff.Observation {
	return handoff.Observation{Signal: handoff.SigOK, Revision: rev}
}

func read(h handoff.Holder, rev uint64) handoff.Observation {
	return handoff.Observation{Signal: handoff.SigRead, Holder: h, Revision: rev}
}

func sig(s handoff.Signal) handoff.Observation {
	return handoff.Observation{Signal: s, Reason: s.String()}
}

type move struct {
	want handoff.Action
	feed handoff.Observation
}

func act(s handoff.Step, rev uint64) handoff.Action { return handoff.Action{Step: s, Revision: rev} }

func reclaim(rev uint64, outcome string, at handoff.Step) handoff.Action {
	return handoff.Action{Step: handoff.StepReclaim, Revision: rev, Record: outcome, FailedAt: at}
}

// TestPlanScripts walks the plan through every path of docs/handoff.md's
// table; the source holds revision 5 and stages revision 10.
func TestPlanScripts(t *testing.T) {
	staged := []move{{act(handoff.StepStage, 5), ok(10)}, {act(handoff.StepMark, 10), ok(0)}}
	checked := append(staged[:2:2], move{act(handoff.StepCheckBacklog, 10), ok(0)})
	started := append(checked[:3:3], move{act(handoff.StepStart, 10), ok(0)})
	cleanup := move{act(handoff.StepCleanup, 0), ok(0)}
	failed := func(at handoff.Step) *handoff.Failure { return &handoff.Failure{Step: at, Reason: "x"} }
	for _, c := range []struct {
		name  string
		moves []move
		want  handoff.Verdict
	}{
		{"moved", append(started[:4:4], move{act(handoff.StepConfirm, 10), read(handoff.HolderTarget, 11)}, cleanup),
			handoff.Verdict{Outcome: handoff.Moved}},
		{"backlog is queued", append(checked[:2:2], move{act(handoff.StepCheckBacklog, 10), sig(handoff.SigBacklog)},
			move{reclaim(10, handoff.OutcomeAbandoned, handoff.StepCheckBacklog), ok(12)}, cleanup),
			handoff.Verdict{Outcome: handoff.Kept, Revision: 12, SkipReason: handoff.SkipQueued}},
		{"refused start", append(checked[:3:3], move{act(handoff.StepStart, 10), sig(handoff.SigRefused)},
			move{reclaim(10, handoff.OutcomeFailed, handoff.StepStart), ok(12)}, cleanup),
			handoff.Verdict{Outcome: handoff.Kept, Revision: 12, Failure: failed(handoff.StepStart)}},
		{"uncertain start, candidate activated", append(checked[:3:3], move{act(handoff.StepStart, 10), sig(handoff.SigUncertain)},
			move{reclaim(10, handoff.OutcomeFailed, handoff.StepStart), read(handoff.HolderTarget, 11)}, cleanup),
			handoff.Verdict{Outcome: handoff.Moved, Failure: failed(handoff.StepStart)}},
		{"uncertain start, reclaim reply lost", append(checked[:3:3], move{act(handoff.StepStart, 10), sig(handoff.SigUncertain)},
			move{reclaim(10, handoff.OutcomeFailed, handoff.StepStart), read(handoff.HolderReclaimed, 13)}, cleanup),
			handoff.Verdict{Outcome: handoff.Kept, Revision: 13, Failure: failed(handoff.StepStart)}},
		{"uncertain start, adopted meanwhile", append(checked[:3:3], move{act(handoff.StepStart, 10), sig(handoff.SigUncertain)},
			move{reclaim(10, handoff.OutcomeFailed, handoff.StepStart), read(handoff.HolderOther, 14)}),
			handoff.Verdict{Outcome: handoff.Lost, Failure: failed(handoff.StepStart)}},
		{"stage lost", []move{{act(handoff.StepStage, 5), read(handoff.HolderOther, 7)}},
			handoff.Verdict{Outcome: handoff.Lost}},
		{"stage reply lost, landed", append([]move{{act(handoff.StepStage, 5), read(handoff.HolderStaged, 10)}}, started[1:]...),
			handoff.Verdict{}}, // continues like a plain stage: not finished
		{"stage conflict, record unmoved: the same CAS again", append([]move{{act(handoff.StepStage, 5), read(handoff.HolderSource, 5)}}, staged...),
			handoff.Verdict{}},
		{"stage never lands: fence it", []move{{act(handoff.StepStage, 5), read(handoff.HolderSource, 5)},
			{act(handoff.StepStage, 5), read(handoff.HolderSource, 5)}, {act(handoff.StepStage, 5), read(handoff.HolderSource, 5)},
			{reclaim(5, handoff.OutcomeFailed, handoff.StepStage), ok(11)}, cleanup},
			handoff.Verdict{Outcome: handoff.Kept, Revision: 11, Failure: failed(handoff.StepStage)}},
		{"stage conflict, record moved but still the source's", []move{{act(handoff.StepStage, 5), read(handoff.HolderSource, 8)},
			{reclaim(8, handoff.OutcomeFailed, handoff.StepStage), ok(11)}, cleanup},
			handoff.Verdict{Outcome: handoff.Kept, Revision: 11, Failure: failed(handoff.StepStage)}},
		{"mark failed", append(staged[:1:1], move{act(handoff.StepMark, 10), sig(handoff.SigFailed)},
			move{reclaim(10, handoff.OutcomeFailed, handoff.StepMark), ok(12)}, cleanup),
			handoff.Verdict{Outcome: handoff.Kept, Revision: 12, Failure: failed(handoff.StepMark)}},
		{"backlog unreadable", append(staged[:2:2], move{act(handoff.StepCheckBacklog, 10), sig(handoff.SigFailed)},
			move{reclaim(10, handoff.OutcomeFailed, handoff.StepCheckBacklog), ok(12)}, cleanup),
			handoff.Verdict{Outcome: handoff.Kept, Revision: 12, Failure: failed(handoff.StepCheckBacklog)}},
		{"confirm sees no activation", append(started[:4:4], move{act(handoff.StepConfirm, 10), read(handoff.HolderStaged, 10)},
			move{reclaim(10, handoff.OutcomeFailed, handoff.StepConfirm), ok(12)}, cleanup),
			handoff.Verdict{Outcome: handoff.Kept, Revision: 12, Failure: failed(handoff.StepConfirm)}},
		{"late landings exhaust the reclaims", append(checked[:3:3], move{act(handoff.StepStart, 10), sig(handoff.SigUncertain)},
			move{reclaim(10, handoff.OutcomeFailed, handoff.StepStart), read(handoff.HolderStaged, 20)},
			move{reclaim(20, handoff.OutcomeFailed, handoff.StepStart), read(handoff.HolderStaged, 21)},
			move{reclaim(21, handoff.OutcomeFailed, handoff.StepStart), read(handoff.HolderStaged, 22)},
			move{reclaim(22, handoff.OutcomeFailed, handoff.StepStart), read(handoff.HolderStaged, 23)}),
			handoff.Verdict{Outcome: handoff.Unknown, Failure: failed(handoff.StepStart)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := handoff.NewPlan(5)
			for i, m := range c.moves {
				if got := p.Next(); got != m.want {
					t.Fatalf("move %d: next %+v, want %+v", i, got, m.want)
				}
				if err := p.Advance(m.feed); err != nil {
					t.Fatalf("move %d: %v", i, err)
				}
			}
			if c.want.Outcome == "" {
				if p.Done() {
					t.Fatalf("finished early: %+v", p.Verdict())
				}
				return
			}
			checkVerdict(t, p, c.want)
		})
	}
}

func checkVerdict(t *testing.T, p *handoff.Plan, want handoff.Verdict) {
	t.Helper()
	if !p.Done() || p.Next().Step != handoff.StepDone {
		t.Fatalf("not finished: next %+v", p.Next())
	}
	got := p.Verdict()
	if got.Outcome != want.Outcome || got.Revision != want.Revision || got.SkipReason != want.SkipReason {
		t.Fatalf("verdict %+v, want %+v", got, want)
	}
	if (got.Failure == nil) != (want.Failure == nil) || got.Failure != nil && got.Failure.Step != want.Failure.Step {
		t.Fatalf("failure %v, want %v", got.Failure, want.Failure)
	}
}

// TestPlanRefusesMisfits: an observation a step cannot report is refused
// and changes nothing.
func TestPlanRefusesMisfits(t *testing.T) {
	p := handoff.NewPlan(5)
	for _, o := range []handoff.Observation{sig(handoff.SigBacklog), sig(handoff.SigRefused), sig(handoff.SigFailed), {}} {
		if err := p.Advance(o); err == nil {
			t.Fatalf("stage took %s", o.Signal)
		}
	}
	if p.Next() != act(handoff.StepStage, 5) || len(p.Steps()) != 0 {
		t.Fatalf("plan changed: %+v %v", p.Next(), p.Steps())
	}
	_ = p.Advance(read(handoff.HolderOther, 6))
	if err := p.Advance(ok(7)); err == nil {
		t.Fatal("a finished plan took an observation")
	}
}

// signalsFor lists what each step can report.
var signalsFor = map[handoff.Step][]handoff.Signal{
	handoff.StepStage:        {handoff.SigOK, handoff.SigRead},
	handoff.StepMark:         {handoff.SigOK, handoff.SigFailed},
	handoff.StepCheckBacklog: {handoff.SigOK, handoff.SigBacklog, handoff.SigFailed},
	handoff.StepStart:        {handoff.SigOK, handoff.SigRefused, handoff.SigUncertain},
	handoff.StepConfirm:      {handoff.SigRead},
	handoff.StepReclaim:      {handoff.SigOK, handoff.SigRead},
	handoff.StepCleanup:      {handoff.SigOK},
}

// TestPlanProperties feeds the plan random observations and checks, after
// every run, the rules the transaction rests on.
func TestPlanProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		held := rapid.Uint64Range(1, 1000).Draw(t, "held")
		p := handoff.NewPlan(held)
		var (
			actions []handoff.Action
			obs     []handoff.Observation
			rev     = held
		)
		for !p.Done() {
			a := p.Next()
			actions = append(actions, a)
			sigs := signalsFor[a.Step]
			o := handoff.Observation{Signal: rapid.SampledFrom(sigs).Draw(t, "signal")}
			switch o.Signal {
			case handoff.SigOK:
				if a.Step == handoff.StepStage || a.Step == handoff.StepReclaim {
					rev += 1 + rapid.Uint64Range(0, 3).Draw(t, "gap")
					o.Revision = rev
				}
			case handoff.SigRead:
				o.Holder = handoff.Holder(rapid.IntRange(0, 4).Draw(t, "holder"))
				rev += rapid.Uint64Range(0, 3).Draw(t, "gap")
				o.Revision = rev
			}
			obs = append(obs, o)
			if err := p.Advance(o); err != nil {
				t.Fatalf("step %s refused %s: %v", a.Step, o.Signal, err)
			}
			if len(actions) > handoff.MaxStages+4+handoff.MaxReclaims+1 {
				t.Fatalf("no end after %d actions: %v", len(actions), p.Steps())
			}
		}
		checkPlanRun(t, held, actions, obs, p.Verdict())
	})
}

func checkPlanRun(t *rapid.T, held uint64, actions []handoff.Action, obs []handoff.Observation, v handoff.Verdict) {
	checkStartGate(t, actions, obs)
	checkReclaimRevisions(t, held, actions, obs)
	checkVerdictEvidence(t, actions, obs, v)
}

// checkStartGate: one start at most, only after a landed stage, a marker
// and a clear backlog; nothing but a reclaim (or the end) after a backlog.
func checkStartGate(t *rapid.T, actions []handoff.Action, obs []handoff.Observation) {
	starts := 0
	for i, a := range actions {
		if a.Step != handoff.StepStart {
			continue
		}
		starts++
		landed := i >= 3 && actions[i-3].Step == handoff.StepStage &&
			(obs[i-3].Signal == handoff.SigOK || obs[i-3].Holder == handoff.HolderStaged)
		if !landed || actions[i-2].Step != handoff.StepMark || obs[i-2].Signal != handoff.SigOK ||
			actions[i-1].Step != handoff.StepCheckBacklog || obs[i-1].Signal != handoff.SigOK {
			t.Fatalf("start at %d after %v / %v", i, actions[:i], obs[:i])
		}
	}
	if starts > 1 {
		t.Fatalf("%d starts", starts)
	}
}

// checkReclaimRevisions: a reclaim CASes at the staged revision or at a
// revision a read just showed the source holding — never anywhere else.
func checkReclaimRevisions(t *rapid.T, held uint64, actions []handoff.Action, obs []handoff.Observation) {
	staged := uint64(0)
	for i, a := range actions {
		if a.Step == handoff.StepStage && (obs[i].Signal == handoff.SigOK || obs[i].Holder == handoff.HolderStaged) {
			staged = obs[i].Revision
		}
		if a.Step != handoff.StepReclaim {
			continue
		}
		prev := obs[i-1]
		fromRead := prev.Signal == handoff.SigRead && (prev.Holder == handoff.HolderStaged || prev.Holder == handoff.HolderSource)
		if a.Revision != staged && !(fromRead && a.Revision == prev.Revision) {
			t.Fatalf("reclaim at %d: staged %d, previous %+v (held %d)", a.Revision, staged, prev, held)
		}
		if a.Record != handoff.OutcomeFailed && a.Record != handoff.OutcomeAbandoned {
			t.Fatalf("reclaim records %q", a.Record)
		}
	}
}

// checkVerdictEvidence: each verdict follows from what was observed.
func checkVerdictEvidence(t *rapid.T, actions []handoff.Action, obs []handoff.Observation, v handoff.Verdict) {
	last, lastObs := actions[len(actions)-1], obs[len(obs)-1]
	sawTarget, sawBacklog := false, false
	for _, o := range obs {
		sawTarget = sawTarget || o.Signal == handoff.SigRead && o.Holder == handoff.HolderTarget
		sawBacklog = sawBacklog || o.Signal == handoff.SigBacklog
	}
	switch v.Outcome {
	case handoff.Moved:
		if !sawTarget || last.Step != handoff.StepCleanup {
			t.Fatalf("moved without the target in the record: %v", obs)
		}
	case handoff.Lost:
		if lastObs.Holder != handoff.HolderOther || lastObs.Signal != handoff.SigRead {
			t.Fatalf("lost after %+v", lastObs)
		}
	case handoff.Kept:
		checkKept(t, actions, obs, v)
	case handoff.Unknown:
		if n := count(actions, handoff.StepReclaim); n != handoff.MaxReclaims {
			t.Fatalf("unknown after %d reclaims", n)
		}
	default:
		t.Fatalf("verdict %q", v.Outcome)
	}
	if v.Outcome == handoff.Kept && (v.SkipReason == handoff.SkipQueued) != sawBacklog {
		t.Fatalf("kept with skip %q, backlog seen %v", v.SkipReason, sawBacklog)
	}
}

func checkKept(t *rapid.T, actions []handoff.Action, obs []handoff.Observation, v handoff.Verdict) {
	i := len(actions) - 2 // the action before the clean-up decided
	a, o := actions[i], obs[i]
	landed := a.Step == handoff.StepReclaim && o.Signal == handoff.SigOK
	read := o.Signal == handoff.SigRead && o.Holder == handoff.HolderReclaimed
	if actions[len(actions)-1].Step != handoff.StepCleanup || !(landed || read) || v.Revision != o.Revision {
		t.Fatalf("kept at %d after %s %+v", v.Revision, a.Step, o)
	}
	if (v.SkipReason == "") == (v.Failure == nil) {
		t.Fatalf("kept with skip %q and failure %v: exactly one is expected", v.SkipReason, v.Failure)
	}
}

func count(actions []handoff.Action, s handoff.Step) int {
	n := 0
	for _, a := range actions {
		if a.Step == s {
			n++
		}
	}
	return n
}

// TestClassify: who holds a record, relative to one handoff.
func TestClassify(t *testing.T) {
	req := handoff.Request{HandoffID: "h1", SessionID: "s", SourceRun: "r1", Source: "blue", Target: "green",
		Record: record.Session{Record: record.SessionRecord{SessionID: "s", OwnerRunID: "r1", Epoch: 3}}}
	rec := func(run string, epoch uint64, st record.State, h *record.HandoffOutcome, dep string) record.Session {
		return record.Session{Record: record.SessionRecord{SessionID: "s", OwnerRunID: run, Epoch: epoch, State: st, Handoff: h, DeploymentID: dep}, Revision: 9}
	}
	out := func(id, o string) *record.HandoffOutcome {
		return &record.HandoffOutcome{ID: id, Target: "green", Outcome: o}
	}
	for i, c := range []struct {
		s    record.Session
		want handoff.Holder
	}{
		{rec("r1", 3, record.StateActive, nil, "blue"), handoff.HolderSource},
		{rec("r1", 3, record.StateActive, out("h0", handoff.OutcomeFailed), "blue"), handoff.HolderSource},
		{rec("r1", 3, record.StateHandoff, out("h1", handoff.OutcomeStaged), "blue"), handoff.HolderStaged},
		{rec("r1", 3, record.StateActive, out("h1", handoff.OutcomeFailed), "blue"), handoff.HolderReclaimed},
		{rec("r1", 3, record.StateActive, out("h1", handoff.OutcomeAbandoned), "blue"), handoff.HolderReclaimed},
		{rec("c1", 4, record.StateActive, out("h1", handoff.OutcomeCompleted), "green"), handoff.HolderTarget},
		{rec("a1", 5, record.StateActive, out("h1", handoff.OutcomeCompleted), "green"), handoff.HolderTarget}, // adopted after
		{rec("a1", 4, record.StateActive, out("h1", "failed"), "blue"), handoff.HolderOther},                   // adopted instead
		{rec("r1", 4, record.StateActive, nil, "blue"), handoff.HolderOther},                                   // same run, other epoch
		{rec("r1", 3, record.StateHandoff, out("h2", handoff.OutcomeStaged), "blue"), handoff.HolderOther},
		{rec("r1", 3, record.StateEnded, nil, "blue"), handoff.HolderOther},
	} {
		if got := handoff.Classify(req, c.s); got != c.want {
			t.Errorf("%d: %s, want %s", i, got, c.want)
		}
	}
}
