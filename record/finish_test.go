package record_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/baton-rt/baton/record"
)

var endReq = record.FinishRequest{Op: record.FinishEnd, By: "admin-1", At: at}

// requested is a quarantined record holding an operator's end.
func requested(t *testing.T) record.SessionRecord {
	t.Helper()
	r, err := record.RequestFinish(parkedRec(t), endReq)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// An operator's finish request goes into a quarantined record, as one
// request at a time (the same one again is no write); the finisher's claim
// keeps the deployment, epoch and state; the finish clears the request.
// A retry goes into no other record (an end may: TestOrphanEnd).
func TestFinishTransitions(t *testing.T) {
	parked := parkedRec(t)
	r := requested(t)
	if !r.FinishPending() || r.Writer != "admin-1" || r.WriteCounter != 0 || r.State != record.StateQuarantined || r.Epoch != parked.Epoch {
		t.Fatalf("requested: %+v", r)
	}
	if again, err := record.RequestFinish(r, record.FinishRequest{Op: record.FinishEnd, By: "admin-2", At: at}); err != nil || again.Writer != "admin-1" {
		t.Fatalf("the same request again: writer %q, %v; want the record as it was", again.Writer, err)
	}
	retry := record.FinishRequest{Op: record.FinishRetry, DeploymentID: "green", By: "admin-3", At: at}
	if _, err := record.RequestFinish(r, retry); !errors.Is(err, record.ErrTransition) {
		t.Fatalf("a retry while an end is pending: %v, want ErrTransition", err)
	}
	for name, f := range map[string]record.FinishRequest{
		"an unknown op":            {Op: "erase", By: "a", At: at},
		"a retry on latest":        {Op: record.FinishRetry, DeploymentID: "latest", By: "a", At: at},
		"a request without writer": {Op: record.FinishEnd, At: at},
	} {
		if _, err := record.RequestFinish(parked, f); !errors.Is(err, record.ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := record.RequestFinish(newRec(t), retry); !errors.Is(err, record.ErrTransition) {
		t.Fatalf("a retry of a session that is not quarantined: %v, want ErrTransition", err)
	}

	if _, err := record.ClaimFinish(parked, "p1", "finish-1"); !errors.Is(err, record.ErrTransition) {
		t.Fatalf("a finish claim with none pending: %v", err)
	}
	c, err := record.ClaimFinish(r, "p1", "finish-1")
	if err != nil || c.OwnerProcess != "p1" || c.OwnerRunID != "finish-1" || c.Writer != "finish-1" ||
		c.Epoch != r.Epoch || c.DeploymentID != r.DeploymentID || !c.FinishPending() {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	done, err := record.Terminate(c, "end-1", record.Appended{Seq: 8, Event: []byte("{}")})
	if err != nil || done.Finish != nil || !done.Terminated() || done.OwnerProcess != "" || done.OwnerRunID != "" {
		t.Fatalf("the end: %+v, %v", done, err)
	}
	rr, err := record.RequestFinish(parked, retry)
	if err == nil {
		rr, err = record.Retry(rr, "green", false, "retry-1", record.Appended{Seq: 8, Event: []byte("{}")})
	}
	if err != nil || rr.Finish != nil || rr.State != record.StateHibernated {
		t.Fatalf("the retry: %+v, %v", rr, err)
	}
}

// The request keeps the members a later build added to it.
func TestFinishRequestKeepsUnknownMembers(t *testing.T) {
	r := requested(t)
	r.Finish.Extra = record.Members(`"later":"yes"`)
	b, err := record.EncodeSession(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := record.DecodeSession(b)
	if err != nil || back.Finish == nil || back.Finish.Extra != r.Finish.Extra || !back.Finish.Same(endReq) {
		t.Fatalf("decoded %+v, %v", back.Finish, err)
	}
	var doc struct{ Finish map[string]any }
	if err := json.Unmarshal(b, &doc); err != nil || doc.Finish["later"] != "yes" || doc.Finish["op"] != "end" {
		t.Fatalf("encoded %s", b)
	}
}

// The end of a session no owner of its deployment runs (active, paused or
// hibernated) is a pending finish too: no claim takes the record while it
// is pending, the finisher's claim does, and the end leaves a record every
// build tells from a session its own run ended (Terminated: a Quarantine
// saying why, on the session's deployment). An ended or mid-handoff
// session takes no end request.
func TestOrphanEnd(t *testing.T) {
	live := newRec(t)
	f := record.FinishRequest{Op: record.FinishEnd, By: "user-1", At: at, EndedBy: record.EndedByUser, Message: "bye"}
	r, err := record.RequestFinish(live, f)
	if err != nil || !r.FinishPending() || r.State != live.State || r.Epoch != live.Epoch || r.Finish.Message != "bye" {
		t.Fatalf("end request into an active record: %+v, %v", r, err)
	}
	if _, err := record.Claim(r, record.Owner{Process: "p9", RunID: "r9", Deployment: r.DeploymentID},
		record.Boot{Settled: record.StateActive, At: at}); !errors.Is(err, record.ErrTransition) {
		t.Fatalf("a claim of a record whose end is pending: %v, want ErrTransition", err)
	}
	c, err := record.ClaimFinish(r, "p1", "finish-1")
	if err != nil {
		t.Fatal(err)
	}
	done, err := record.Terminate(c, "end-1", record.Appended{Seq: 8, Event: []byte("{}")})
	if err != nil || done.State != record.StateEnded || done.Finish != nil || !done.Terminated() || done.Quarantined() ||
		done.Quarantine == nil || done.Quarantine.DeploymentID != live.DeploymentID || !done.Quarantine.Since.Equal(at) {
		t.Fatalf("the end: %+v, %v", done, err)
	}
	if _, err := record.RequestFinish(done, f); !errors.Is(err, record.ErrTransition) {
		t.Fatalf("an end request into an ended record: %v, want ErrTransition", err)
	}
	if _, err := record.Terminate(live, "end-2", record.Appended{Seq: 8, Event: []byte("{}")}); !errors.Is(err, record.ErrTransition) {
		t.Fatalf("terminate with no end pending: %v, want ErrTransition", err)
	}
	for name, bad := range map[string]record.FinishRequest{
		"endedBy other":  {Op: record.FinishEnd, By: "u", At: at, EndedBy: "robot"},
		"a long message": {Op: record.FinishEnd, By: "u", At: at, Message: strings.Repeat("x", record.MaxEndMessageBytes+1)},
	} {
		if _, err := record.RequestFinish(live, bad); !errors.Is(err, record.ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
