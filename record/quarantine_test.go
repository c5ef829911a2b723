package record_test

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-rt/baton/record"
)

var (
	at    = time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	event = record.Appended{Seq: 7, Event: []byte(`{"seq":7}`)}
)

// parkedRec is a quarantined record after three attempts.
func parkedRec(t *testing.T) record.SessionRecord {
	t.Helper()
	q, err := record.Quarantine(newRec(t), record.QuarantineInfo{Attempts: 3, Error: "boom", Since: at, DeploymentID: "blue"}, "q-1", event)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// The attempt a claim counts: the end of the run the record names, when it
// may have died of the session — a step in flight, no commit since its
// claim (the mark), or attempts that never settled — and not when that run
// is known to have stopped alive. The error of a quarantine is the last
// one seen.
func TestAttempt(t *testing.T) {
	marked := newRec(t) // a claim's (or a start's) record: the run has not committed yet
	settled, err := record.Commit(marked, marked.Ownership(), record.StateActive, 1, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	hibernated, err := record.Hibernate(marked, marked.Ownership())
	if err != nil {
		t.Fatal(err)
	}
	released, err := record.Release(marked, "op-1")
	if err != nil {
		t.Fatal(err)
	}
	failed, err := record.Failed(settled, "segment missing", "boot-1", at)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		r        record.SessionRecord
		attempts int
		boot     record.Boot
		want     int
	}{
		{"settled: not counted", settled, 0, record.Boot{}, 0},
		{"hibernated by its run: not counted", hibernated, 0, record.Boot{}, 0},
		{"a step in flight", settled, 0, record.Boot{InFlight: true}, 1},
		{"an unsettled boot", settled, 2, record.Boot{}, 3},
		{"both", settled, 1, record.Boot{InFlight: true}, 2},
		{"the mark: a run that never committed", marked, 0, record.Boot{}, 1},
		{"the mark after unsettled attempts", marked, 1, record.Boot{}, 2},
		{"a failed attempt before", failed, 1, record.Boot{}, 2},
		{"the claimer saw the run stop: nothing more", marked, 0, record.Boot{InFlight: true, Lived: true}, 0},
		{"the claimer saw it stop after attempts: a suspect still", settled, 2, record.Boot{InFlight: true, Lived: true}, 2},
		{"released: no run to have died", released, 0, record.Boot{InFlight: true}, 0},
		{"released after attempts", released, 1, record.Boot{InFlight: true}, 1},
	} {
		r := tt.r
		r.BootAttempts = tt.attempts
		if got := record.Attempt(r, tt.boot); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
	if !record.Unsettled(marked) || record.Unsettled(settled) || record.Unsettled(hibernated) || record.Unsettled(released) || record.Unsettled(failed) {
		t.Errorf("the mark: marked %v settled %v hibernated %v released %v failed %v", record.Unsettled(marked),
			record.Unsettled(settled), record.Unsettled(hibernated), record.Unsettled(released), record.Unsettled(failed))
	}
	r := settled
	if got := record.Failure(r); got != record.ProcessDied {
		t.Errorf("no error recorded: %q", got)
	}
	r.LastBootError = "checkpoint: unsupported"
	if got := record.Failure(r); got != "checkpoint: unsupported" {
		t.Errorf("recorded error: %q", got)
	}
}

// The counting of a session that keeps killing its process while it
// loads: the first claim after a settled point counts nothing and leaves
// the mark; each claim that finds it counts one, until QuarantineAfter;
// the run's first commit clears the mark, and a settled commit the count.
func TestAttemptsOfABootThatKills(t *testing.T) {
	r := newRec(t)
	r, err := record.Commit(r, r.Ownership(), record.StateActive, 1, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if r, err = record.Hibernate(r, r.Ownership()); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{0, 1, 2, 3} {
		o := record.Owner{RunID: "run-" + string(rune('a'+i)), Deployment: "blue", Process: "p"}
		if n := record.Attempt(r, record.Boot{}); n != want {
			t.Fatalf("claim %d runs as attempt %d, want %d", i+1, n, want)
		}
		if r, err = record.Claim(r, o, record.Boot{Settled: record.StateActive, At: at}); err != nil {
			t.Fatal(err)
		}
		if r.BootAttempts != want || !record.Unsettled(r) {
			t.Fatalf("claim %d: attempts %d, marked %v", i+1, r.BootAttempts, record.Unsettled(r))
		}
	}
	boot, err := record.Commit(r, r.Ownership(), record.StateActive, 1, nil, false) // a boot commit, a step due
	if err != nil || record.Unsettled(boot) || boot.BootAttempts != 3 {
		t.Fatalf("boot commit: %v, marked %v, attempts %d", err, record.Unsettled(boot), boot.BootAttempts)
	}
	idle, err := record.Commit(r, r.Ownership(), record.StateActive, 1, nil, true)
	if err != nil || idle.BootAttempts != 0 || record.Attempt(idle, record.Boot{}) != 0 {
		t.Fatalf("settled commit: %v, attempts %d", err, idle.BootAttempts)
	}
}

// A run whose own commit the store refused counts the attempt with the
// refusal as its error and lets the session go; the next claim counts no
// death for it, and a quarantine names the refusal.
func TestRefused(t *testing.T) {
	r := newRec(t)
	r, err := record.Commit(r, r.Ownership(), record.StateActive, 4, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	cause := record.CommitTooLarge + ": 600000 bytes"
	for i := 1; i <= 3; i++ {
		if r, err = record.Refused(r, r.Ownership(), cause, "refused-"+string(rune('0'+i)), at); err != nil {
			t.Fatal(err)
		}
		if r.BootAttempts != i || r.LastBootError != cause || !r.BootAttemptAt.Equal(at) || r.OwnerRunID != "" || r.OwnerProcess != "" ||
			r.Epoch != uint64(i) || r.State != record.StateActive || r.WriteCounter != 0 {
			t.Fatalf("refusal %d: %+v", i, r)
		}
		if n := record.Attempt(r, record.Boot{InFlight: true}); n != i {
			t.Fatalf("claim after refusal %d runs as attempt %d", i, n)
		}
		if i < 3 {
			o := record.Owner{RunID: "run-" + string(rune('0'+i)), Deployment: "blue", Process: "p"}
			if r, err = record.Claim(r, o, record.Boot{Settled: record.StateActive, InFlight: true, At: at.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			if r.BootAttempts != i || r.LastBootError != cause || !r.BootAttemptAt.Equal(at) {
				t.Fatalf("claim after refusal %d changed the count: %+v", i, r)
			}
		}
	}
	if got := record.Failure(r); got != cause {
		t.Fatalf("quarantine error %q, want %q", got, cause)
	}
	for name, apply := range map[string]func() (record.SessionRecord, error){
		"by another run": func() (record.SessionRecord, error) {
			return record.Refused(r, record.Ownership{OwnerRunID: "x", Epoch: 3}, cause, "w", at)
		},
		"when quarantined": func() (record.SessionRecord, error) {
			q := parkedRec(t)
			return record.Refused(q, q.Ownership(), cause, "w", at)
		},
		"mid-handoff": func() (record.SessionRecord, error) {
			s := staged(t)
			return record.Refused(s, s.Ownership(), cause, "w", at)
		},
	} {
		if _, err := apply(); !errors.Is(err, record.ErrTransition) {
			t.Errorf("refused %s: %v", name, err)
		}
	}
}

// Every quarantine transition from a valid start, and its refusals, which
// change nothing.
func TestQuarantineTransitions(t *testing.T) {
	active := newRec(t)
	ended, err := record.End(active, active.Ownership(), 3, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	counting := with(active, func(r *record.SessionRecord) { r.BootAttempts, r.LastBootError = 2, "old" })
	settled, err := record.Commit(active, active.Ownership(), record.StateActive, 1, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		apply func() (record.SessionRecord, error)
		check func(record.SessionRecord) bool // nil: must be refused
	}{
		{"fail counts the attempt, ownership kept", func() (record.SessionRecord, error) {
			return record.Failed(active, "segment missing", "fail-1", at)
		}, func(r record.SessionRecord) bool {
			return r.BootAttempts == 1 && r.LastBootError == "segment missing" && r.BootAttemptAt.Equal(at) &&
				r.OwnerRunID == active.OwnerRunID && r.Epoch == 1 && r.State == record.StateActive && r.Writer == "fail-1"
		}},
		{"fail an ended session", func() (record.SessionRecord, error) { return record.Failed(ended, "x", "w", at) }, nil},
		{"fail a quarantined session", func() (record.SessionRecord, error) { return record.Failed(parkedRec(t), "x", "w", at) }, nil},
		{"quarantine", func() (record.SessionRecord, error) { return parkedRec(t), nil },
			func(r record.SessionRecord) bool {
				q := r.Quarantine
				return r.State == record.StateQuarantined && q.Attempts == 3 && q.Error == "boom" && q.Since.Equal(at) &&
					r.BootAttempts == 3 && r.OwnerProcess == "" && r.OwnerRunID == "" && r.Epoch == 1 &&
					r.Writer == "q-1" && r.WriteCounter == 0 && r.EventSeqFloor == 7 && string(r.FloorEvent) == `{"seq":7}`
			}},
		{"quarantine a staged session adopts it", func() (record.SessionRecord, error) {
			return record.Quarantine(staged(t), record.QuarantineInfo{Attempts: 3}, "q", event)
		}, func(r record.SessionRecord) bool {
			return r.State == record.StateQuarantined && r.Handoff.Outcome == record.OutcomeFailed
		}},
		{"quarantine twice", func() (record.SessionRecord, error) {
			return record.Quarantine(parkedRec(t), record.QuarantineInfo{Attempts: 4}, "q", record.Appended{Seq: 8, Event: []byte("{}")})
		}, nil},
		{"quarantine an ended session", func() (record.SessionRecord, error) {
			return record.Quarantine(ended, record.QuarantineInfo{Attempts: 3}, "q", event)
		}, nil},
		{"quarantine below the floor", func() (record.SessionRecord, error) {
			return record.Quarantine(with(active, func(r *record.SessionRecord) { r.EventSeqFloor = 7 }), record.QuarantineInfo{Attempts: 3}, "q", event)
		}, nil},
		{"quarantine without its event", func() (record.SessionRecord, error) {
			return record.Quarantine(active, record.QuarantineInfo{Attempts: 3}, "q", record.Appended{Seq: 7})
		}, nil},
		{"retry in place", func() (record.SessionRecord, error) {
			return record.Retry(parkedRec(t), "blue", false, "retry-1", record.Appended{Seq: 8, Event: []byte("{}")})
		}, func(r record.SessionRecord) bool {
			return r.State == record.StateHibernated && r.Quarantine == nil && r.Retry == nil && r.BootAttempts == 0 &&
				r.LastBootError == "" && r.BootAttemptAt.IsZero() && r.EventSeqFloor == 8 && r.Writer == "retry-1" && r.Epoch == 1
		}},
		{"retry on another deployment", func() (record.SessionRecord, error) {
			return record.Retry(parkedRec(t), "green", true, "retry-1", record.Appended{Seq: 8, Event: []byte("{}")})
		}, func(r record.SessionRecord) bool {
			return r.State == record.StateHibernated && r.Retry != nil && *r.Retry == record.RetryTarget{DeploymentID: "green", Force: true} &&
				r.DeploymentID == "blue"
		}},
		{"retry a session that is not quarantined", func() (record.SessionRecord, error) {
			return record.Retry(active, "blue", false, "r", record.Appended{Seq: 8, Event: []byte("{}")})
		}, nil},
		{"retry on latest", func() (record.SessionRecord, error) {
			return record.Retry(parkedRec(t), "latest", false, "r", record.Appended{Seq: 8, Event: []byte("{}")})
		}, nil},
		{"retry at the floor", func() (record.SessionRecord, error) { return record.Retry(parkedRec(t), "blue", false, "r", event) }, nil},
		{"terminate", func() (record.SessionRecord, error) {
			return record.Terminate(requested(t), "end-1", record.Appended{Seq: 8, Event: []byte("{}")})
		}, func(r record.SessionRecord) bool {
			return r.State == record.StateEnded && r.EventSeqFloor == 8 && r.Writer == "end-1" && r.Terminated() && !r.Quarantined()
		}},
		{"terminate a live session", func() (record.SessionRecord, error) {
			return record.Terminate(active, "end-1", record.Appended{Seq: 8, Event: []byte("{}")})
		}, nil},
		{"terminate a quarantined session with no end pending", func() (record.SessionRecord, error) {
			return record.Terminate(parkedRec(t), "end-1", record.Appended{Seq: 8, Event: []byte("{}")})
		}, nil},
		{"terminate an ended session", func() (record.SessionRecord, error) {
			return record.Terminate(ended, "end-1", record.Appended{Seq: 8, Event: []byte("{}")})
		}, nil},
		{"claim a settled session counts nothing and leaves the mark", func() (record.SessionRecord, error) {
			return record.Claim(settled, green, record.Boot{Settled: record.StateActive, At: at})
		}, func(r record.SessionRecord) bool {
			return r.BootAttempts == 0 && r.BootAttemptAt.IsZero() && r.Epoch == 2 && record.Unsettled(r)
		}},
		{"claim with a step in flight counts it", func() (record.SessionRecord, error) {
			return record.Claim(settled, green, record.Boot{Settled: record.StateActive, InFlight: true, At: at})
		}, func(r record.SessionRecord) bool { return r.BootAttempts == 1 && r.BootAttemptAt.Equal(at) }},
		{"claim that finds the mark counts it", func() (record.SessionRecord, error) {
			return record.Claim(active, green, record.Boot{Settled: record.StateActive, At: at})
		}, func(r record.SessionRecord) bool {
			return r.BootAttempts == 1 && r.BootAttemptAt.Equal(at) && r.Epoch == 2
		}},
		{"claim of a run its claimer saw stop counts nothing, keeps the count", func() (record.SessionRecord, error) {
			return record.Claim(counting, green, record.Boot{Settled: record.StateActive, InFlight: true, Lived: true, At: at})
		}, func(r record.SessionRecord) bool {
			return r.BootAttempts == 2 && r.LastBootError == "old" && r.BootAttemptAt.IsZero()
		}},
		{"claim after unsettled attempts counts and clears the error", func() (record.SessionRecord, error) {
			return record.Claim(counting, green, record.Boot{Settled: record.StateActive, At: at})
		}, func(r record.SessionRecord) bool { return r.BootAttempts == 3 && r.LastBootError == "" }},
		{"claim a quarantined session", func() (record.SessionRecord, error) {
			return record.Claim(parkedRec(t), blue, record.Boot{Settled: record.StateActive})
		}, nil},
		{"claim uses up the retry target", func() (record.SessionRecord, error) {
			r, err := record.Retry(parkedRec(t), "green", false, "r", record.Appended{Seq: 8, Event: []byte("{}")})
			if err != nil {
				return r, err
			}
			return record.Claim(r, green, record.Boot{Settled: record.StateActive})
		}, func(r record.SessionRecord) bool {
			return r.Retry == nil && r.DeploymentID == "green" && r.State == record.StateActive && r.Epoch == 2 && r.EventSeqFloor == 8
		}},
		{"claim of a session retried elsewhere", func() (record.SessionRecord, error) {
			r, err := record.Retry(parkedRec(t), "green", false, "r", record.Appended{Seq: 8, Event: []byte("{}")})
			if err != nil {
				return r, err
			}
			return record.Claim(r, blue, record.Boot{Settled: record.StateActive})
		}, nil},
		{"activate a quarantined session", func() (record.SessionRecord, error) { return record.Activate(parkedRec(t), green, marker) }, nil},
		{"release a quarantined session", func() (record.SessionRecord, error) { return record.Release(parkedRec(t), "w") }, nil},
		{"hibernate a quarantined session", func() (record.SessionRecord, error) {
			q := parkedRec(t)
			return record.Hibernate(q, q.Ownership())
		}, nil},
		{"stage a quarantined session", func() (record.SessionRecord, error) {
			q := parkedRec(t)
			return record.Stage(q, q.Ownership(), "h1", "green")
		}, nil},
		{"a settled commit resets the attempts and drops the floor event", func() (record.SessionRecord, error) {
			r := with(counting, func(r *record.SessionRecord) { r.EventSeqFloor, r.FloorEvent = 7, []byte("{}") })
			return record.Commit(r, r.Ownership(), record.StateActive, 1, nil, true)
		}, func(r record.SessionRecord) bool {
			return r.BootAttempts == 0 && r.LastBootError == "" && r.FloorEvent == nil && r.EventSeqFloor == 7
		}},
		{"a commit with a step due keeps them", func() (record.SessionRecord, error) {
			return record.Commit(counting, counting.Ownership(), record.StateActive, 1, nil, false)
		}, func(r record.SessionRecord) bool { return r.BootAttempts == 2 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.apply()
			if tt.check == nil {
				var te *record.TransitionError
				if !errors.As(err, &te) && !errors.Is(err, record.ErrInvalid) || te != nil && te.SessionID != sid {
					t.Fatalf("want a refusal, got %v (%+v)", err, r)
				}
				return
			}
			if err != nil || !tt.check(r) {
				t.Fatalf("err %v, record %+v", err, r)
			}
		})
	}
}

// A quarantined record keeps a valid state; its floor bounds a boot's seq.
func TestQuarantinedRecord(t *testing.T) {
	q := parkedRec(t)
	if err := q.Validate(); err != nil || !q.Quarantined() {
		t.Fatalf("%v %+v", err, q)
	}
	if q.EventSeq(3) != 7 || q.EventSeq(9) != 9 {
		t.Fatalf("event seq %d %d", q.EventSeq(3), q.EventSeq(9))
	}
}

// A suspect runs alone when its last run died mid-step, or when one more
// death would quarantine it; a boot counted for the mark alone, further
// from quarantine, runs side by side.
func TestAlone(t *testing.T) {
	for _, tc := range []struct {
		inFlight bool
		n, q     int
		want     bool
	}{
		{false, 0, 3, false}, // no suspect
		{true, 0, 3, false},
		{true, 1, 3, true},   // mid-step: always alone
		{false, 1, 3, false}, // the mark, two deaths from quarantine
		{false, 2, 3, true},  // the next death quarantines
		{false, 1, 2, true},
		{false, 1, 1, true},
		{false, 3, 5, false},
		{false, 4, 5, true},
	} {
		if got := record.Alone(record.Boot{InFlight: tc.inFlight}, tc.n, tc.q); got != tc.want {
			t.Errorf("Alone(inFlight %v, n %d, q %d) = %v, want %v", tc.inFlight, tc.n, tc.q, got, tc.want)
		}
	}
}
