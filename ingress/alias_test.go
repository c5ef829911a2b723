package ingress_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/wire"
)

// 20 concurrent first deliveries to one new alias create ONE session (the
// owner claims the alias create-only before replying; every loser is told
// the winner) and all 20 commands land in it.
func TestAliasRace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	n := testsize.Pick(20, 100)
	receipts := make([]ingress.Receipt, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			code, b := e.post("/v1/deliveries", fmt.Sprintf(`{"alias":"C123.456","text":"m%d"}`, i))
			if code != http.StatusAccepted {
				t.Errorf("delivery %d = %d %s", i, code, b)
				return
			}
			receipts[i] = decode[ingress.Receipt](t, b)
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	id, created := receipts[0].SessionID, 0
	for i, r := range receipts {
		if r.SessionID != id {
			t.Fatalf("delivery %d went to %s, delivery 0 to %s", i, r.SessionID, id)
		}
		if r.Created {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d receipts say created, want 1", created)
	}
	evs := e.waitEvents(id, fmt.Sprintf("%d deliveries applied", n), func(evs []wire.Event) bool {
		return harness.Count(evs, wire.EventCommandApplied) == n
	})
	contiguous(t, evs, 0)
	if len(harness.Outputs(evs)) != n {
		t.Fatalf("%d outputs, want %d", len(harness.Outputs(evs)), n)
	}
	if got := liveKeys(t, e, e.Names.SessionsBucket()); len(got) != 1 || got[0] != id {
		t.Fatalf("sessions %v, want only %s", got, id)
	}
}

// The same idempotency key 10 times is one command (same seq, same
// created), also addressed by alias and by session ID, also concurrently;
// the same key on another session is another command.
func TestIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	first := e.deliver(`{"alias":"idem-a","text":"once","idempotencyKey":"k-1"}`)
	if !first.Created {
		t.Fatalf("first delivery did not create: %+v", first)
	}
	inbox := e.durable()[e.Names.InboxStream()]
	for i := range 10 {
		body := `{"alias":"idem-a","text":"once","idempotencyKey":"k-1"}`
		if i%2 == 1 { // the session ID is the same target as its alias
			body = `{"sessionId":"` + first.SessionID + `","text":"once","idempotencyKey":"k-1"}`
		}
		if r := e.deliver(body); r != first {
			t.Fatalf("repeat %d = %+v, first %+v", i, r, first)
		}
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			if r := e.deliver(`{"alias":"idem-a","text":"once","idempotencyKey":"k-1"}`); r != first {
				t.Errorf("concurrent repeat = %+v, first %+v", r, first)
			}
		})
	}
	wg.Wait()
	if got := e.durable()[e.Names.InboxStream()]; got != inbox {
		t.Fatalf("repeats stored %d messages", got-inbox)
	}

	// The same key on another session is another command.
	other := e.create(`{"alias":"idem-b"}`)
	second := e.deliver(`{"alias":"idem-b","text":"once","idempotencyKey":"k-1"}`)
	if second.SessionID != other.SessionID || second.Seq == first.Seq || second.Created {
		t.Fatalf("same key on another session = %+v (first %+v)", second, first)
	}
	for _, id := range []string{first.SessionID, second.SessionID} {
		evs := e.waitEvents(id, "one delivery applied", func(evs []wire.Event) bool { return len(harness.Outputs(evs)) == 1 })
		if got := applied(t, evs); len(got) != 1 || got[0].Kind != "deliver" {
			t.Fatalf("session %s applied %+v", id, got)
		}
	}
	// Concurrent first deliveries of one key to a new alias: one command.
	var seqs sync.Map
	for range 10 {
		wg.Go(func() {
			r := e.deliver(`{"alias":"idem-c","text":"race","idempotencyKey":"k-2"}`)
			seqs.Store(r, true)
		})
	}
	wg.Wait()
	n := 0
	seqs.Range(func(k, _ any) bool { n++; return true })
	if n != 1 {
		t.Fatalf("%d different receipts for one key", n)
	}
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := jsonUnmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}
