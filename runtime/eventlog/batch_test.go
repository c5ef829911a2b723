package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime/eventlog"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// batchEnv is a server with the topology and one connection's Batches.
type batchEnv struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	names   subjects.Names
	events  kv.Stream
	batches *eventlog.Batches
}

func newBatchEnv(t *testing.T, cfg topology.Config) batchEnv {
	t.Helper()
	s := natstest.Server(t)
	nc, js := natstest.Connect(t, s.ClientURL())
	if _, err := topology.Ensure(t.Context(), js, cfg); err != nil {
		t.Fatal(err)
	}
	n := subjects.Default()
	b, err := eventlog.NewBatches(t.Context(), nc, js, n.EventsStream())
	if err != nil || b == nil {
		t.Fatalf("batches: %v %v (the topology allows fast batches)", b, err)
	}
	t.Cleanup(b.Close)
	return batchEnv{nc: nc, js: js, names: n, events: kv.NewStream(js, n.EventsStream()), batches: b}
}

func (e batchEnv) appender(id string) *eventlog.Appender {
	return eventlog.NewAppender(e.js, e.events, e.names.Events(id), id).WithBatches(e.batches)
}

func events(from, to int) [][]byte {
	var out [][]byte
	for i := from; i <= to; i++ {
		out = append(out, fmt.Appendf(nil, "e%d", i))
	}
	return out
}

// A commit's events go as one batch; what is there is skipped; a stale
// appender's batch is refused by the fence on its first event, and the
// leader read that follows appends only what is missing.
func TestAppendAllBatch(t *testing.T) {
	e := newBatchEnv(t, topology.Config{})
	ctx := t.Context()
	a := e.appender("S1")
	if err := a.AppendAll(ctx, 1, events(1, 6)); err != nil {
		t.Fatal(err)
	}
	if err := a.AppendAll(ctx, 4, events(4, 8)); err != nil {
		t.Fatal(err)
	}
	// a successor appends 9..12 behind a's back
	b := e.appender("S1")
	if err := b.AppendAll(ctx, 1, events(1, 12)); err != nil {
		t.Fatal(err)
	}
	// a's cached position is stale: its batch 9..14 is fenced off, then
	// 13..14 follow the successor's 12
	if err := a.AppendAll(ctx, 9, events(9, 14)); err != nil {
		t.Fatal(err)
	}
	if err := a.AppendAll(ctx, 16, events(16, 17)); !errors.Is(err, kv.ErrEventGap) {
		t.Fatalf("gap not refused: %v", err)
	}
	assertEvents(t, e.js, e.names.EventsStream(), e.names.Events("S1"), 14)
}

// The fence holds where message IDs cannot: a stale appender's events
// older than the stream's duplicate window would land again, after the
// successor's, but its batch's first event expects the subject's last
// sequence it knew, so nothing of it lands.
func TestAppendAllFenceOutlivesTheDuplicateWindow(t *testing.T) {
	const window = 500 * time.Millisecond
	e := newBatchEnv(t, topology.Config{DuplicateWindow: window})
	ctx := t.Context()
	a := e.appender("S4")
	if err := a.AppendAll(ctx, 1, events(1, 3)); err != nil {
		t.Fatal(err)
	}
	b := e.appender("S4")
	if err := b.AppendAll(ctx, 1, events(1, 6)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * window) // 4..6 are no longer recognised as duplicates
	if err := a.AppendAll(ctx, 4, events(4, 6)); err != nil {
		t.Fatal(err)
	}
	assertEvents(t, e.js, e.names.EventsStream(), e.names.Events("S4"), 6)
}

// The fence, raced: writers append the same committed events (the same
// outbox, as a stale owner and its successor do), each in batches of a
// few from its own view of the subject, at once. Every event lands once,
// in order, whatever interleaves — the duplicates of a batch's later
// events are dropped by their message IDs, a batch whose first event is
// not next is refused.
func TestAppendAllRacingWriters(t *testing.T) {
	e := newBatchEnv(t, topology.Config{})
	const writers, total = 4, 240
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		a := e.appender("RACE")
		wg.Go(func() {
			for from := 1; from <= total; {
				n := 2 + (from+w)%5
				to := min(from+n-1, total)
				if err := a.AppendAll(t.Context(), uint64(from), events(from, to)); err != nil {
					errs <- fmt.Errorf("writer %d: %d..%d: %w", w, from, to, err)
					return
				}
				from = to + 1
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	assertEvents(t, e.js, e.names.EventsStream(), e.names.Events("RACE"), total)
}

// A message the stream refuses in the middle of a batch (here: one over
// the stream's size limit) ends the batch there: the events after it are
// not stored, so the subject never holds a gap, and the append reports
// the refusal.
func TestAppendAllRefusedEventEndsTheBatch(t *testing.T) {
	e := newBatchEnv(t, topology.Config{MaxMsgSize: 4096})
	a := e.appender("S2")
	data := events(1, 6)
	data[3] = []byte(strings.Repeat("x", 8192)) // event 4
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if err := a.AppendAll(ctx, 1, data); err == nil {
		t.Fatal("an oversized event was appended")
	}
	assertEvents(t, e.js, e.names.EventsStream(), e.names.Events("S2"), 3)
}

// A stream without fast batches (an older topology or server): NewBatches
// says so, and AppendAll publishes one event at a time.
func TestAppendAllWithoutBatches(t *testing.T) {
	s := natstest.Server(t)
	nc, js := natstest.Connect(t, s.ClientURL())
	ctx := t.Context()
	if _, err := topology.Ensure(ctx, js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	n := subjects.Default()
	st, err := js.Stream(ctx, n.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	cfg.AllowBatchPublish = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	b, err := eventlog.NewBatches(ctx, nc, js, n.EventsStream())
	if err != nil || b != nil {
		t.Fatalf("batches on a stream without them: %v %v", b, err)
	}
	a := eventlog.NewAppender(js, kv.NewStream(js, n.EventsStream()), n.Events("S3"), "S3").WithBatches(b)
	if err := a.AppendAll(ctx, 1, events(1, 5)); err != nil {
		t.Fatal(err)
	}
	assertEvents(t, js, n.EventsStream(), n.Events("S3"), 5)
}
