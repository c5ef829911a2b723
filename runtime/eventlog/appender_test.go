package eventlog_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime/eventlog"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

func TestAppenderExactlyOnceAndContiguous(t *testing.T) {
	s := natstest.Server(t)
	_, js := natstest.Connect(t, s.ClientURL())
	ctx := t.Context()
	if _, err := topology.Ensure(ctx, js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	n := subjects.Default()
	events := kv.NewStream(js, n.EventsStream())
	a := eventlog.NewAppender(js, events, n.Events("S1"), "S1")
	for seq := uint64(1); seq <= 3; seq++ {
		if err := a.Append(ctx, seq, fmt.Appendf(nil, "e%d", seq)); err != nil {
			t.Fatal(err)
		}
	}
	// A re-published outbox (after a crash) skips what is there.
	if err := a.Append(ctx, 2, []byte("e2")); err != nil {
		t.Fatal(err)
	}
	// A second appender with stale state (a successor) learns from the leader.
	b := eventlog.NewAppender(js, events, n.Events("S1"), "S1")
	for seq := uint64(1); seq <= 5; seq++ {
		if err := b.Append(ctx, seq, fmt.Appendf(nil, "e%d", seq)); err != nil {
			t.Fatal(err)
		}
	}
	// The first appender's cached position is now stale: its append of 6 is
	// rejected by the expected-sequence check and settled by a leader read.
	if err := a.Append(ctx, 6, []byte("e6")); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, 8, []byte("e8")); !errors.Is(err, kv.ErrEventGap) {
		t.Fatalf("gap not refused: %v", err)
	}
	assertEvents(t, js, n.EventsStream(), n.Events("S1"), 6)
}

func assertEvents(t *testing.T, js jetstream.JetStream, stream, subject string, want int) {
	t.Helper()
	c, err := js.OrderedConsumer(t.Context(), stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for {
		batch, err := c.FetchNoWait(100)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			i++
			if got := string(m.Data()); got != fmt.Sprintf("e%d", i) {
				t.Fatalf("event %d = %q", i, got)
			}
			if m.Headers().Get(wire.HeaderEventSeq) != fmt.Sprint(i) {
				t.Fatalf("event %d header %q", i, m.Headers().Get(wire.HeaderEventSeq))
			}
		}
		if n == 0 {
			break
		}
	}
	if i != want {
		t.Fatalf("%d events on %s, want %d", i, subject, want)
	}
}
