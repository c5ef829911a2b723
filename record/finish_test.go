package record_test

import (
	"encoding/json"
	"errors"
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

// An operator's finish request goes only into a quarantined record, as one
// request at a time (the same one again is no write); the finisher's claim
// keeps the deployment, epoch and state; the finish clears the request.
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
		"an unknown op":            {Op: "delete", By: "a", At: at},
		"a retry on latest":        {Op: record.FinishRetry, DeploymentID: "latest", By: "a", At: at},
		"a request without writer": {Op: record.FinishEnd, At: at},
	} {
		if _, err := record.RequestFinish(parked, f); !errors.Is(err, record.ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := record.RequestFinish(newRec(t), endReq); !errors.Is(err, record.ErrTransition) {
		t.Fatalf("a request for a live session: %v, want ErrTransition", err)
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
	r.Finish.Extra = record.Members(`"reason":"later"`)
	b, err := record.EncodeSession(r)
	if err != nil {
		t.Fatal(err)
	}
	back, err := record.DecodeSession(b)
	if err != nil || back.Finish == nil || back.Finish.Extra != r.Finish.Extra || !back.Finish.Same(endReq) {
		t.Fatalf("decoded %+v, %v", back.Finish, err)
	}
	var doc struct{ Finish map[string]any }
	if err := json.Unmarshal(b, &doc); err != nil || doc.Finish["reason"] != "later" || doc.Finish["op"] != "end" {
		t.Fatalf("encoded %s", b)
	}
}
