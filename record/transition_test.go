package record_test

import (
	"errors"
	"testing"

	"github.com/baton-rt/baton/record"
)

const sid = "01JSESSION00000000000000000"

var (
	blue  = record.Owner{RunID: "run-b1", Deployment: "blue", Process: "pb", WireV: 1}
	green = record.Owner{RunID: "run-g1", Deployment: "green", Process: "pg", WireV: 2}
)

func newRec(t *testing.T) record.SessionRecord {
	t.Helper()
	r, err := record.New(sid, blue, []byte(`{"stateV":1}`))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func with(r record.SessionRecord, f func(*record.SessionRecord)) record.SessionRecord {
	f(&r)
	return r
}

func staged(t *testing.T) record.SessionRecord {
	t.Helper()
	r := newRec(t)
	s, err := record.Stage(r, r.Ownership(), "h1", "green")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var marker = record.Marker{HandoffID: "h1", SessionID: sid, Target: "green", TriggerSeq: 9, TriggerCommandID: "c9"}

func TestNew(t *testing.T) {
	r := newRec(t)
	want := record.Ownership{SessionID: sid, OwnerRunID: "run-b1", DeploymentID: "blue", Epoch: 1, Process: "pb"}
	if r.Ownership() != want || r.State != record.StateActive || r.Consumer != sid+"-1" || r.Writer != "run-b1" || r.WriteCounter != 0 || r.WireV != 1 {
		t.Fatalf("%+v", r)
	}
	for _, o := range []record.Owner{{}, {RunID: "r", Process: "p", Deployment: "latest"}, {RunID: "r", Deployment: "blue"}} {
		if _, err := record.New(sid, o, nil); err == nil {
			t.Errorf("New with owner %+v accepted", o)
		}
	}
	if _, err := record.New("bad id!", blue, nil); !errors.Is(err, record.ErrInvalid) {
		t.Errorf("bad session ID: %v", err)
	}
}

// Every transition: the record it writes from a valid start, and its
// refusals (wrong run or epoch, wrong state, ended), which change nothing.
func TestTransitions(t *testing.T) {
	active := newRec(t)
	ended, err := record.End(active, active.Ownership(), 3, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	hib, err := record.Hibernate(active, active.Ownership())
	if err != nil {
		t.Fatal(err)
	}
	stale := record.Ownership{SessionID: sid, OwnerRunID: "run-old", Epoch: 1}
	wrongEpoch := with(active, func(r *record.SessionRecord) { r.Epoch = 2 }).Ownership()
	wrongEpoch.Epoch = 1
	for _, tt := range []struct {
		name  string
		apply func() (record.SessionRecord, error)
		check func(record.SessionRecord) bool // nil: must be refused
	}{
		{"claim a hibernated session", func() (record.SessionRecord, error) {
			return record.Claim(hib, green, record.Boot{Settled: record.StateActive})
		},
			func(r record.SessionRecord) bool {
				return r.Epoch == 2 && r.State == record.StateActive && r.OwnerRunID == "run-g1" && r.Consumer == sid+"-2" && r.WriteCounter == 0 && r.WireV == 2
			}},
		{"claim a paused session stays paused", func() (record.SessionRecord, error) {
			return record.Claim(with(active, func(r *record.SessionRecord) { r.State = record.StatePaused }), blue, record.Boot{Settled: record.StatePaused})
		}, func(r record.SessionRecord) bool { return r.State == record.StatePaused && r.Epoch == 2 }},
		{"claim an ended session stays ended", func() (record.SessionRecord, error) {
			return record.Claim(ended, blue, record.Boot{Settled: record.StateActive})
		},
			func(r record.SessionRecord) bool { return r.State == record.StateEnded && r.Epoch == 2 }},
		{"claim a staged session adopts it", func() (record.SessionRecord, error) {
			return record.Claim(staged(t), blue, record.Boot{Settled: record.StateActive})
		},
			func(r record.SessionRecord) bool {
				return r.State == record.StateActive && r.Handoff.Outcome == record.OutcomeFailed && r.Handoff.Step == record.StepRecover && r.Epoch == 2
			}},
		{"claim into another state", func() (record.SessionRecord, error) {
			return record.Claim(active, blue, record.Boot{Settled: record.StateHandoff})
		}, nil},
		{"stage", func() (record.SessionRecord, error) { return record.Stage(active, active.Ownership(), "h1", "green") },
			func(r record.SessionRecord) bool {
				return r.State == record.StateHandoff && r.Handoff.ID == "h1" && r.Handoff.Outcome == record.OutcomeStaged && r.Epoch == 1 && r.Writer == active.Writer
			}},
		{"stage by a stale run", func() (record.SessionRecord, error) { return record.Stage(active, stale, "h1", "green") }, nil},
		{"stage at a wrong epoch", func() (record.SessionRecord, error) {
			return record.Stage(with(active, func(r *record.SessionRecord) { r.Epoch = 2 }), wrongEpoch, "h1", "green")
		}, nil},
		{"stage a hibernated session", func() (record.SessionRecord, error) { return record.Stage(hib, hib.Ownership(), "h1", "green") }, nil},
		{"stage an ended session", func() (record.SessionRecord, error) { return record.Stage(ended, ended.Ownership(), "h1", "green") }, nil},
		{"reclaim", func() (record.SessionRecord, error) {
			s := staged(t)
			return record.Reclaim(s, s.Ownership(), "h1", record.OutcomeAbandoned, "check-backlog")
		}, func(r record.SessionRecord) bool {
			return r.State == record.StateActive && r.Handoff.Outcome == record.OutcomeAbandoned && r.Epoch == 1
		}},
		{"reclaim another handoff", func() (record.SessionRecord, error) {
			s := staged(t)
			return record.Reclaim(s, s.Ownership(), "h2", record.OutcomeFailed, "start")
		}, nil},
		{"reclaim an active session", func() (record.SessionRecord, error) {
			return record.Reclaim(active, active.Ownership(), "h1", record.OutcomeFailed, "start")
		}, nil},
		{"activate", func() (record.SessionRecord, error) { return record.Activate(staged(t), green, marker) },
			func(r record.SessionRecord) bool {
				h := r.Handoff
				return r.Epoch == 2 && r.State == record.StateActive && r.DeploymentID == "green" && r.OwnerRunID == "run-g1" &&
					h.Outcome == record.OutcomeCompleted && h.Step == record.StepActivate && h.From == "blue" && h.TriggerSeq == 9 &&
					record.Unconfirmed(r) != nil
			}},
		{"activate on the wrong deployment", func() (record.SessionRecord, error) { return record.Activate(staged(t), blue, marker) }, nil},
		{"activate another handoff", func() (record.SessionRecord, error) {
			m := marker
			m.HandoffID = "h2"
			return record.Activate(staged(t), green, m)
		}, nil},
		{"activate an unstaged session", func() (record.SessionRecord, error) { return record.Activate(active, green, marker) }, nil},
		{"activate an ended session", func() (record.SessionRecord, error) { return record.Activate(ended, green, marker) }, nil},
		{"release", func() (record.SessionRecord, error) { return record.Release(active, "release-1") },
			func(r record.SessionRecord) bool {
				return r.OwnerRunID == "" && r.OwnerProcess == "" && r.Epoch == 1 && r.Writer == "release-1" && r.WriteCounter == 0
			}},
		{"release an ended session", func() (record.SessionRecord, error) { return record.Release(ended, "w") }, nil},
		{"release a staged session", func() (record.SessionRecord, error) { return record.Release(staged(t), "w") }, nil},
		{"hibernate", func() (record.SessionRecord, error) { return record.Hibernate(active, active.Ownership()) },
			func(r record.SessionRecord) bool {
				return r.State == record.StateHibernated && r.Epoch == 1 && r.WriteCounter == 1 && r.OwnerRunID == "run-b1"
			}},
		{"hibernate by a stale run", func() (record.SessionRecord, error) { return record.Hibernate(active, stale) }, nil},
		{"hibernate an ended session", func() (record.SessionRecord, error) { return record.Hibernate(ended, ended.Ownership()) }, nil},
		{"commit", func() (record.SessionRecord, error) {
			return record.Commit(active, active.Ownership(), record.StatePaused, 7, []byte(`{"x":1}`), true)
		}, func(r record.SessionRecord) bool {
			return r.State == record.StatePaused && r.WriteCounter == 7 && string(r.Checkpoint) == `{"x":1}`
		}},
		{"commit confirms a handoff", func() (record.SessionRecord, error) {
			a, _ := record.Activate(staged(t), green, marker)
			return record.Commit(a, a.Ownership(), record.StateActive, 1, nil, true)
		}, func(r record.SessionRecord) bool {
			return r.Handoff.Step == record.StepConfirmed && record.Unconfirmed(r) == nil
		}},
		{"commit by a stale run", func() (record.SessionRecord, error) {
			return record.Commit(active, stale, record.StateActive, 2, nil, true)
		}, nil},
		{"commit an ended session live", func() (record.SessionRecord, error) {
			return record.Commit(ended, ended.Ownership(), record.StateActive, 4, nil, true)
		}, nil},
		{"commit into hibernated", func() (record.SessionRecord, error) {
			return record.Commit(active, active.Ownership(), record.StateHibernated, 2, nil, true)
		}, nil},
		{"end", func() (record.SessionRecord, error) { return record.End(active, active.Ownership(), 2, []byte(`{}`)) },
			func(r record.SessionRecord) bool { return r.State == record.StateEnded && r.WriteCounter == 2 }},
		{"end by a stale run", func() (record.SessionRecord, error) { return record.End(active, stale, 2, nil) }, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.apply()
			if tt.check == nil {
				var te *record.TransitionError
				if !errors.As(err, &te) || !errors.Is(err, record.ErrTransition) || te.SessionID != sid {
					t.Fatalf("want a *TransitionError, got %v (%+v)", err, r)
				}
				return
			}
			if err != nil || !tt.check(r) {
				t.Fatalf("err %v, record %+v (handoff %+v)", err, r, r.Handoff)
			}
		})
	}
}

// Adopt and Confirm leave records they do not apply to unchanged.
func TestAdoptConfirmNoOps(t *testing.T) {
	r := newRec(t)
	if got := record.Adopt(r); got.State != r.State || got.Handoff != nil {
		t.Fatalf("Adopt changed an active record: %+v", got)
	}
	if got := record.Confirm(r); got.Handoff != nil {
		t.Fatalf("Confirm changed a record without a handoff: %+v", got)
	}
}
