package record_test

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-rt/baton/record"
)

// A delete is asked of an ended session only, claimed like a finish and
// leaves a tombstone that keeps the ID and nothing else; a tombstone is
// never claimed nor deleted again.
func TestDeleteTransitions(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	live := newRec(t)
	del := record.FinishRequest{Op: record.FinishDelete, Reason: record.DeleteByUser, By: "user-1", At: at}
	if _, err := record.RequestFinish(live, del); !errors.Is(err, record.ErrTransition) {
		t.Fatalf("the delete of a live session: %v, want ErrTransition", err)
	}
	ended, err := record.End(live, live.Ownership(), 1, []byte(`{"stateV":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if ended.FinishPending() {
		t.Fatal("an ended session without a delete has a finish pending")
	}
	if _, err := record.RequestFinish(ended, record.FinishRequest{Op: record.FinishDelete, Reason: "whim", By: "u", At: at}); !errors.Is(err, record.ErrInvalid) {
		t.Fatalf("a delete for no known reason: %v, want ErrInvalid", err)
	}
	asked, err := record.RequestFinish(ended, del)
	if err != nil || !asked.FinishPending() || asked.Finish.Reason != record.DeleteByUser || asked.Writer != "user-1" {
		t.Fatalf("the delete request: %+v, %v", asked.Finish, err)
	}
	if again, err := record.RequestFinish(asked, record.FinishRequest{Op: record.FinishDelete, Reason: record.DeleteByRetention, By: "r", At: at}); err != nil || again.Writer != "user-1" {
		t.Fatalf("a second delete: writer %q, %v; want the first one kept", again.Writer, err)
	}
	if _, err := record.Claim(asked, blue, record.Boot{Settled: record.StateActive}); !errors.Is(err, record.ErrTransition) {
		t.Fatalf("a claim of a session whose delete is pending: %v", err)
	}
	claimed, err := record.ClaimFinish(asked, "p1", "finish-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := record.Tombstone(claimed, "finish-2", at, record.Removed{}); !errors.Is(err, record.ErrTransition) {
		t.Fatalf("a tombstone by another claimant: %v", err)
	}
	removed := record.Removed{Events: 7, Blobs: 2, Bytes: 9000}
	tomb, err := record.Tombstone(claimed, "finish-1", at, removed)
	if err != nil {
		t.Fatal(err)
	}
	if !tomb.IsDeleted() || tomb.State != record.StateEnded || len(tomb.Checkpoint) != 0 || tomb.Finish != nil ||
		tomb.OwnerRunID != "" || tomb.SessionID != sid || tomb.Deleted.Removed != removed || tomb.Deleted.Reason != record.DeleteByUser {
		t.Fatalf("tombstone: %+v", tomb)
	}
	if tomb.FinishPending() {
		t.Fatal("a tombstone has a finish pending")
	}
	if _, err := record.Claim(tomb, blue, record.Boot{Settled: record.StateActive}); !errors.Is(err, record.ErrTransition) {
		t.Fatalf("a claim of a tombstone: %v", err)
	}
	if _, err := record.RequestFinish(tomb, del); !errors.Is(err, record.ErrTransition) {
		t.Fatalf("the delete of a tombstone: %v", err)
	}
	b, err := record.EncodeSession(tomb)
	if err != nil {
		t.Fatal(err)
	}
	back, err := record.DecodeSession(b)
	if err != nil || !back.IsDeleted() || back.Deleted.Removed != removed || !back.Deleted.At.Equal(at) {
		t.Fatalf("decoded %s: %+v, %v", b, back.Deleted, err)
	}
}
