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

// The attempt a claim counts: only with work in flight, or after attempts
// that never settled; the error of a quarantine is the last one seen.
func TestAttempt(t *testing.T) {
	r := newRec(t)
	for _, tt := range []struct {
		name     string
		attempts int
		inFlight bool
		want     int
	}{
		{"settled: not counted", 0, false, 0},
		{"a step in flight", 0, true, 1},
		{"an unsettled boot", 2, false, 3},
		{"both", 1, true, 2},
	} {
		r.BootAttempts = tt.attempts
		if got := record.Attempt(r, tt.inFlight); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
	if got := record.Failure(r); got != record.ProcessDied {
		t.Errorf("no error recorded: %q", got)
	}
	r.LastBootError = "checkpoint: unsupported"
	if got := record.Failure(r); got != "checkpoint: unsupported" {
		t.Errorf("recorded error: %q", got)
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
			return record.Terminate(parkedRec(t), "end-1", record.Appended{Seq: 8, Event: []byte("{}")})
		}, func(r record.SessionRecord) bool {
			return r.State == record.StateEnded && r.EventSeqFloor == 8 && r.Writer == "end-1" && r.Terminated() && !r.Quarantined()
		}},
		{"terminate a live session", func() (record.SessionRecord, error) {
			return record.Terminate(active, "end-1", record.Appended{Seq: 8, Event: []byte("{}")})
		}, nil},
		{"terminate an ended session", func() (record.SessionRecord, error) {
			return record.Terminate(ended, "end-1", record.Appended{Seq: 8, Event: []byte("{}")})
		}, nil},
		{"claim a settled session counts nothing", func() (record.SessionRecord, error) {
			return record.Claim(active, green, record.Boot{Settled: record.StateActive, At: at})
		}, func(r record.SessionRecord) bool {
			return r.BootAttempts == 0 && r.BootAttemptAt.IsZero() && r.Epoch == 2
		}},
		{"claim with a step in flight counts it", func() (record.SessionRecord, error) {
			return record.Claim(active, green, record.Boot{Settled: record.StateActive, InFlight: true, At: at})
		}, func(r record.SessionRecord) bool { return r.BootAttempts == 1 && r.BootAttemptAt.Equal(at) }},
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
