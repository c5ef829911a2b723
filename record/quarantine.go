package record

import (
	"encoding/json"
	"time"

	"github.com/baton-rt/baton/subjects"
)

// ProcessDied is the quarantine error of a session whose last claimant
// vanished mid-boot or mid-step: its process died (a fatal runtime error,
// os.Exit in agent code, a kill) before the session settled.
const ProcessDied = "process_died"

// QuarantineInfo is what the record says of a quarantined session: how
// many attempts it took, the last error seen, and since when.
type QuarantineInfo struct {
	Attempts     int       `json:"attempts"`
	Error        string    `json:"error"`
	Since        time.Time `json:"since"`
	DeploymentID string    `json:"deploymentId"` // the deployment that could not run it
	// Extra: the members this build does not know (SessionRecord.Extra).
	Extra Members `json:"-"`
}

type quarantineInfo QuarantineInfo

// MarshalJSON encodes the quarantine with the members it kept.
func (q QuarantineInfo) MarshalJSON() ([]byte, error) {
	return encodeKeeping(quarantineInfo(q), q.Extra)
}

// UnmarshalJSON decodes the quarantine and keeps unknown members in Extra.
func (q *QuarantineInfo) UnmarshalJSON(data []byte) error {
	return decodeInto(data, (*quarantineInfo)(q), &q.Extra)
}

// RetryTarget is an operator's retry of a quarantined session on another
// deployment: that deployment adopts it (BootAdopt) although the session's
// own deployment is not retired. Force lets the adoption cancel live waits,
// the rule of a forced move.
type RetryTarget struct {
	DeploymentID string `json:"deploymentId"`
	Force        bool   `json:"force,omitempty"`
	// Extra: the members this build does not know (SessionRecord.Extra).
	Extra Members `json:"-"`
}

type retryTarget RetryTarget

// MarshalJSON encodes the retry with the members it kept.
func (t RetryTarget) MarshalJSON() ([]byte, error) {
	return encodeKeeping(retryTarget(t), t.Extra)
}

// UnmarshalJSON decodes the retry and keeps unknown members in Extra.
func (t *RetryTarget) UnmarshalJSON(data []byte) error {
	return decodeInto(data, (*retryTarget)(t), &t.Extra)
}

// Appended is the event a transition outside any owner's commit appends
// (session.quarantined, session.retried, session.ended): its seq, the
// record's new EventSeqFloor, and its wire encoding, kept in the record
// until a commit lands (SessionRecord.FloorEvent).
type Appended struct {
	Seq   uint64
	Event json.RawMessage
}

// Quarantine errors of a run that stopped because the store refused its
// own commit (Refused): the commit was larger than the bucket accepts, or
// refused as invalid. The error a quarantine records starts with the code.
const (
	CommitTooLarge = "commit_too_large"
	CommitInvalid  = "commit_invalid"
	// maxCauseBytes bounds the cause Refused keeps.
	maxCauseBytes = 1024
)

// Boot is what a claimer knows of the session it claims: the state its
// checkpoint settles to (active or paused), whether the checkpoint shows a
// step in flight (an admitted turn whose step had not committed: the
// previous owner vanished mid-step), whether the run the record names
// stopped while its process lived, and the claimer's clock.
type Boot struct {
	Settled  State
	InFlight bool
	// Lived: the claimer is the process that ran the run the record names,
	// and saw that run stop (a fence, a failed run): its end was no death.
	Lived bool
	At    time.Time
}

// Attempt is the boot attempt a claim of r runs as; above r.BootAttempts
// it counts one more, 0 is no suspect. The claim counts the end of the run
// the record names as a death that may be the session's doing —
// r.BootAttempts+1 — when that run had a step in flight (b.InFlight), had
// not reached its first commit since its claim (Unsettled: the mark every
// claim leaves), or followed attempts that never settled. A run known to
// have stopped while its process lived (b.Lived, or a record that names no
// run: released, or let go after a refused commit) is no death: the claim
// runs as r.BootAttempts, still a suspect after unsettled attempts.
func Attempt(r SessionRecord, b Boot) int {
	switch {
	case b.Lived || r.OwnerRunID == "":
		return r.BootAttempts
	case b.InFlight || r.BootAttempts > 0 || Unsettled(r):
		return r.BootAttempts + 1
	}
	return 0
}

// Alone reports whether a suspect boot (attempt n > 0, Attempt's) must run
// alone among its process's suspects: when its last run died with a step
// in flight (b.InFlight: a step that may kill its process again), or when
// its next death would quarantine it (n >= quarantineAfter-1). Below that,
// a boot counted only because its last run vanished while loading runs
// side by side with other boots: one more death costs it a count, never
// its quarantine, and the sessions a process had just been handed when it
// died (a rollout's handoffs) are not booted one by one. A session that
// does kill every process that loads it still reaches quarantineAfter-1 and
// then runs alone, so its innocent neighbours settle before it runs again.
func Alone(b Boot, n, quarantineAfter int) bool {
	return n > 0 && (b.InFlight || n >= quarantineAfter-1)
}

// Unsettled reports the mark a claim leaves: the record names a live run
// (active or paused) that has written nothing since its claim — its writer
// stamp is the claim's, counter 0. Its first commit, or its hibernation,
// clears the mark. A claim that finds the mark knows that run vanished
// while loading the session.
func Unsettled(r SessionRecord) bool {
	return r.OwnerRunID != "" && r.Writer == r.OwnerRunID && r.WriteCounter == 0 &&
		(r.State == StateActive || r.State == StatePaused)
}

// Failure is the error a quarantine records: the last error seen, or
// ProcessDied when the last attempt claimed the session and vanished.
func Failure(r SessionRecord) string {
	if r.LastBootError != "" {
		return r.LastBootError
	}
	return ProcessDied
}

// Failed records a boot attempt that failed before its claim (an
// unreadable checkpoint, a missing history segment): the attempt and its
// error, ownership unchanged. Its writer stamp settles an uncertain write.
func Failed(r SessionRecord, cause, writer string, at time.Time) (SessionRecord, error) {
	if err := parked("fail", r); err != nil {
		return SessionRecord{}, err
	}
	r.BootAttempts++
	r.LastBootError, r.BootAttemptAt = cause, at
	r.Writer, r.WriteCounter = writer, 0
	r.UpdatedAt = time.Time{}
	return r, nil
}

// Refused records that the owner run by stops because the store refused
// its own commit (too large, invalid; cause names it, led by CommitTooLarge
// or CommitInvalid): the attempt is counted with cause as the last error,
// and the run lets the session go — no owner process or run, writer stamp
// writer — so the next claim, by any process, counts no death for it
// (Attempt) and a quarantine that follows names cause, not ProcessDied.
func Refused(r SessionRecord, by Ownership, cause, writer string, at time.Time) (SessionRecord, error) {
	if err := held("refuse", r, by); err != nil {
		return SessionRecord{}, err
	}
	if err := parked("refuse", r); err != nil {
		return SessionRecord{}, err
	}
	if r.State == StateHandoff {
		return SessionRecord{}, refuse("refuse", r, "mid-handoff: the handoff transaction settles it")
	}
	if len(cause) > maxCauseBytes {
		cause = cause[:maxCauseBytes-3] + "..."
	}
	r.BootAttempts++
	r.LastBootError, r.BootAttemptAt = cause, at
	r.OwnerProcess, r.OwnerRunID = "", ""
	r.Writer, r.WriteCounter = writer, 0
	r.UpdatedAt = time.Time{}
	return r, nil
}

// Quarantine moves the session to quarantined instead of running it: no owner
// process or run (no consumer, no index entry), the attempts and error in
// q, the writer stamp, and the event ev (session.quarantined) as the new
// event-seq floor. A staged record whose source died is adopted first.
func Quarantine(r SessionRecord, q QuarantineInfo, writer string, ev Appended) (SessionRecord, error) {
	if err := parked("quarantine", r); err != nil {
		return SessionRecord{}, err
	}
	if err := floor("quarantine", r, ev); err != nil {
		return SessionRecord{}, err
	}
	r = Adopt(r)
	r.State, r.Quarantine = StateQuarantined, &q
	r.BootAttempts, r.LastBootError, r.BootAttemptAt = q.Attempts, q.Error, q.Since
	return operated(r, writer, ev), nil
}

// Retry is an operator's retry of a quarantined session: the counter
// cleared, the record hibernated so the next wake claims it (epoch+1) —
// on its own deployment, or, when target names another one, by that
// deployment's adoption (RetryTarget) — and ev (session.retried) as the new
// event-seq floor.
func Retry(r SessionRecord, target string, force bool, writer string, ev Appended) (SessionRecord, error) {
	if err := inQuarantine("retry", r); err != nil {
		return SessionRecord{}, err
	}
	if err := subjects.ValidateDeployment(target); err != nil {
		return SessionRecord{}, invalid("retry of %s: %w", r.SessionID, err)
	}
	if err := floor("retry", r, ev); err != nil {
		return SessionRecord{}, err
	}
	r.State, r.Quarantine, r.Retry, r.Finish = StateHibernated, nil, nil, nil
	r.BootAttempts, r.LastBootError, r.BootAttemptAt = 0, "", time.Time{}
	if target != r.DeploymentID {
		r.Retry = &RetryTarget{DeploymentID: target, Force: force}
	}
	return operated(r, writer, ev), nil
}

// Terminate carries out a pending end (FinishPending: of a quarantined
// session, or of one no owner of its deployment ran), as the owner that
// finishes the request writes it (record/finish.go): no run is live, so
// the record ends without the machine (state ended; ev, session.ended
// with reason terminated, as the new event-seq floor; the request
// cleared). The checkpoint is left as it was (it may be unreadable, and
// builds before state version 8 read no terminated): an ended record is
// never run again. A session that was not quarantined gets a Quarantine
// that says why no run ended it (at, the request's time), so every build
// — those before this end, too — tells it from a session its own run
// ended (Terminated) and never boots it.
func Terminate(r SessionRecord, writer string, ev Appended) (SessionRecord, error) {
	if !r.FinishPending() || r.Finish.Op != FinishEnd {
		return SessionRecord{}, refuse("terminate", r, "no end is pending")
	}
	if err := floor("terminate", r, ev); err != nil {
		return SessionRecord{}, err
	}
	if r.Quarantine == nil || !r.Quarantined() {
		r.Quarantine = &QuarantineInfo{Error: "ended at its " + r.Finish.Requester() + "'s request while no owner of its deployment ran",
			Since: r.Finish.At, DeploymentID: r.DeploymentID}
	}
	r.State, r.Finish = StateEnded, nil
	return operated(r, writer, ev), nil
}

// Quarantined reports a record that no owner may run.
func (r SessionRecord) Quarantined() bool { return r.State == StateQuarantined }

// Terminated reports a session ended outside any run (Terminate: an
// operator's or a user's end of a quarantined session, or a user's end of
// one no owner ran): its checkpoint does not say ended, and no owner may
// run it.
func (r SessionRecord) Terminated() bool { return r.State == StateEnded && r.Quarantine != nil }

// EventSeq is the seq a boot of r continues from: the larger of the
// checkpoint's (cpSeq) and the record's floor.
func (r SessionRecord) EventSeq(cpSeq uint64) uint64 { return max(cpSeq, r.EventSeqFloor) }

// operated stamps an operator-side write: no owner process or run, writer
// with counter 0 (it settles an uncertain write), the appended event as
// the floor.
func operated(r SessionRecord, writer string, ev Appended) SessionRecord {
	r.OwnerProcess, r.OwnerRunID = "", ""
	r.Writer, r.WriteCounter = writer, 0
	r.EventSeqFloor, r.FloorEvent = ev.Seq, ev.Event
	r.UpdatedAt = time.Time{}
	return r
}

// parked refuses a boot-failure write on a record that cannot boot
// anyway: ended, or quarantined already.
func parked(t string, r SessionRecord) error {
	switch r.State {
	case StateEnded:
		return refuse(t, r, "the session has ended")
	case StateQuarantined:
		return refuse(t, r, "the session is quarantined already")
	}
	return nil
}

func inQuarantine(t string, r SessionRecord) error {
	if r.State != StateQuarantined {
		return refuse(t, r, "the session is not quarantined")
	}
	return nil
}

// floor refuses an appended event that would not follow the record's
// floor (an event seq never goes back) or that is missing.
func floor(t string, r SessionRecord, ev Appended) error {
	if ev.Seq == 0 || ev.Seq <= r.EventSeqFloor || len(ev.Event) == 0 {
		return refuse(t, r, "event seq %d does not follow the floor %d", ev.Seq, r.EventSeqFloor)
	}
	return nil
}
