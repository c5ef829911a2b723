package eventlog_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/topology"
)

// An append the fence refuses because the subject moved on is settled by
// the leader read at once, not after the wait between tries. The wait is
// set to an hour here, longer than the backoff's limit on the time spent,
// so a refused try that had to wait is not tried again at all: each append
// below succeeds only by the immediate re-read.
//
// The batch case is the one a handoff met: a successor re-publishes the
// last outbox while the source's own append of it lands first, so the
// successor's batch is all duplicates; the position it keeps after that
// batch is not the subject's last message, and its next batch (the boot
// commit's new events) was refused by the fence and waited 10–30 ms.
func TestFencedAppendSettlesAtOnce(t *testing.T) {
	e := newBatchEnv(t, topology.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	a := e.appender("S7")
	if err := a.AppendAll(ctx, 1, events(1, 3)); err != nil {
		t.Fatal(err)
	}
	b := e.appender("S7")
	b.SetRetryWait(time.Hour)
	if last, err := b.Last(ctx); err != nil || last != 3 {
		t.Fatalf("last %d, %v", last, err)
	}
	// a appends 4..6 first; b's copy of them is all duplicates
	if err := a.AppendAll(ctx, 4, events(4, 6)); err != nil {
		t.Fatal(err)
	}
	if err := b.AppendAll(ctx, 4, events(4, 6)); err != nil {
		t.Fatalf("a batch of events already there: %v", err)
	}
	if err := b.AppendAll(ctx, 7, events(7, 8)); err != nil {
		t.Fatalf("the next batch after duplicates: %v", err)
	}
	// one event at a time: c's position is stale by one event of a's
	c := e.appender("S7")
	c.SetRetryWait(time.Hour)
	if _, err := c.Last(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, 9, []byte("e9")); err != nil {
		t.Fatal(err)
	}
	if err := c.Append(ctx, 9, []byte("e9")); err != nil {
		t.Fatalf("a refused event already there: %v", err)
	}
	if err := c.Append(ctx, 10, []byte("e10")); err != nil {
		t.Fatal(err)
	}
	assertEvents(t, e.js, e.names.EventsStream(), e.names.Events("S7"), 10)
}
