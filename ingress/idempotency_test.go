package ingress_test

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/wire"
)

// A receipt written by an ingress that stored no command digest matches
// any repeat of its key: the repeat gets the first receipt, as before
// digests existed, and nothing new is stored.
func TestReceiptWithoutDigestMatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"alias":"old-receipt"}`).SessionID
	first := e.deliver(`{"sessionId":"` + id + `","text":"one","idempotencyKey":"old-1"}`)
	receipts, err := e.JS.KeyValue(t.Context(), ingress.ReceiptsBucket(e.Names))
	if err != nil {
		t.Fatal(err)
	}
	var key string
	for _, k := range liveKeys(t, e, ingress.ReceiptsBucket(e.Names)) {
		if strings.HasPrefix(k, id+".") {
			key = k
		}
	}
	en, err := receipts.Get(t.Context(), key)
	if err != nil || !strings.Contains(string(en.Value()), `"digest":`) {
		t.Fatalf("receipt %q = %v %v, want one with a digest", key, en, err)
	}
	// What an older ingress wrote: no digest.
	if _, err := receipts.Put(t.Context(), key, []byte(`{"created":false,"deploymentId":"v1"}`)); err != nil {
		t.Fatal(err)
	}
	// The first command settled and its events appended (they are appended
	// after the commit, in the background): nothing of it moves on later.
	e.eventually(10*time.Second, "the session idle", func() bool { return e.status(id).Idle })
	e.eventually(10*time.Second, "the first command's events", func() bool { return len(harness.Outputs(e.events(id, 0))) == 1 })
	// Every event the record committed is appended: the output is not the
	// step's last event, and the rest of its outbox follows it.
	e.eventually(10*time.Second, "the committed outbox appended", func() bool { return outboxAppended(t, e, id) })
	before := e.durable()
	if again := e.deliver(`{"sessionId":"` + id + `","text":"two","idempotencyKey":"old-1"}`); again != first {
		t.Fatalf("repeat against a receipt without digest = %+v, want the first %+v", again, first)
	}
	if after := e.durable(); !equalDurable(before, after) {
		t.Fatalf("the repeat wrote: %v -> %v", before, after)
	}
	e.eventually(10*time.Second, "the session idle", func() bool { return e.status(id).Idle })
	if outs := harness.Outputs(e.events(id, 0)); len(outs) != 1 || outs[0] != "one" {
		t.Fatalf("outputs %v, want only the first command's", outs)
	}
}

// outboxAppended reports whether the events stream holds every event of
// the outbox the session's record committed.
func outboxAppended(t *testing.T, e *env, id string) bool {
	t.Helper()
	cur, err := e.Store.LeaderSession(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	outbox, err := wire.PeekOutbox(cur.Record.Checkpoint, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(outbox) == 0 {
		return true
	}
	evs := e.events(id, 0)
	return len(evs) > 0 && evs[len(evs)-1].Seq >= outbox[len(outbox)-1].Seq
}
