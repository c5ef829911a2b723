package handoff_test

import (
	"testing"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/record"
)

// TestCrashMatrix runs every crash point × {crash of the side there, stall
// past the timeout, a new command arriving, the source cut off and
// committing late, a lost reply after a write}, on the in-memory store and
// on kv over a real server. Every scenario must end with exactly one owner
// (checked by real CASes of every party), nothing lost, no marker left
// after the owner's Clean; some also have a fixed verdict.
func TestCrashMatrix(t *testing.T) {
	for _, mk := range []func(*testing.T) *backend{
		func(*testing.T) *backend { return memBackend() },
		func(t *testing.T) *backend { return newNATS(t).backend(t) },
	} {
		b := mk(t)
		t.Run(b.name, func(t *testing.T) {
			for _, m := range []mode{modeOK, modeUnreadable, modeNoResponders} {
				t.Run("base/"+m.String(), func(t *testing.T) {
					sc := newScenario(t, b, m, nil).run()
					sc.check()
					expectBase(t, sc)
				})
			}
			for _, p := range allPoints() {
				for _, f := range []fault{fCrash, fStall, fCommand, fLate, fReplyLost} {
					if f == fReplyLost && !replyLostPoint(p) {
						continue
					}
					t.Run(p.String()+"/"+f.String(), func(t *testing.T) {
						sc := newScenario(t, b, baseMode(p), map[point]fault{p: f}).run()
						if len(sc.fired) == 0 {
							t.Fatalf("%s: crash point not reached", sc)
						}
						sc.check()
						expect(t, sc, p, f)
					})
				}
			}
		})
	}
}

// baseMode reaches the point: a reclaim needs a candidate that refuses.
func baseMode(p point) mode {
	if p.step == handoff.StepReclaim {
		return modeUnreadable
	}
	return modeOK
}

// replyLostPoint: after a write (or the start, or the confirming read),
// where a lost answer must not change the verdict.
func replyLostPoint(p point) bool {
	if !p.after {
		return false
	}
	switch p.step {
	case handoff.StepStage, handoff.StepMark, handoff.StepStart, handoff.StepConfirm, handoff.StepReclaim,
		handoff.StepCleanup, handoff.StepActivate, handoff.StepUnmark:
		return true
	}
	return false
}

// expect checks the verdicts that follow from the fault alone.
func expect(t *testing.T, sc *scenario, p point, f fault) {
	t.Helper()
	switch f {
	case fCommand:
		if beforeBacklogCheck(p) {
			expectQueued(t, sc)
			return
		}
		expectBase(t, sc)
	case fReplyLost:
		expectBase(t, sc)
	}
}

// beforeBacklogCheck: a command arriving here is found by the check.
func beforeBacklogCheck(p point) bool {
	return p.side == onSource && (p.step == handoff.StepStage || p.step == handoff.StepMark ||
		p.step == handoff.StepCheckBacklog && !p.after)
}

// expectBase: the verdict without faults — moved for a willing candidate,
// kept with a start failure otherwise.
func expectBase(t *testing.T, sc *scenario) {
	t.Helper()
	cur := sc.final
	h := cur.Record.Handoff
	if sc.err != nil || h == nil || h.ID != sc.req.HandoffID {
		t.Fatalf("%s: record outcome %+v", sc, h)
	}
	if sc.mode == modeOK {
		if sc.res.Outcome != handoff.Moved || cur.Record.OwnerRunID != candRun || cur.Record.Epoch != 4 ||
			cur.Record.Consumer != sc.id+"-4" || h.Outcome != handoff.OutcomeCompleted || sc.res.Session.Record.OwnerRunID != candRun {
			t.Fatalf("%s: want moved to the candidate at epoch 4, record %s", sc, summary(cur.Record))
		}
		return
	}
	f := sc.res.Failure
	if sc.res.Outcome != handoff.Kept || f == nil || f.Step != handoff.StepStart || h.Outcome != handoff.OutcomeFailed ||
		h.Step != string(handoff.StepStart) || sc.res.Session.Revision != cur.Revision {
		t.Fatalf("%s: want kept after a start failure, record %s", sc, summary(cur.Record))
	}
}

func expectQueued(t *testing.T, sc *scenario) {
	t.Helper()
	cur := sc.final
	h := cur.Record.Handoff
	if sc.err != nil || sc.res.Outcome != handoff.Kept || sc.res.SkipReason != handoff.SkipQueued || sc.res.Failure != nil ||
		h == nil || h.Outcome != handoff.OutcomeAbandoned || cur.Record.State != record.StateActive || cur.Record.OwnerRunID != srcRun {
		t.Fatalf("%s: want kept (queued), record %s", sc, summary(cur.Record))
	}
	for _, s := range sc.res.Steps {
		if s == handoff.StepStart {
			t.Fatalf("%s: started despite a backlog", sc)
		}
	}
}
