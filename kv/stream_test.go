package kv_test

import (
	"context"
	"errors"
	"testing"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestStreamReads: the stream leader reads by sequence, last for a subject
// and next for a subject, on one server and on a three-node cluster with an
// R3 stream that allows direct gets.
func TestStreamReads(t *testing.T) {
	for name, c := range map[string]struct {
		url      func(t *testing.T) string
		replicas int
	}{
		"single":  {func(t *testing.T) string { return natstest.Server(t).ClientURL() }, 1},
		"cluster": {func(t *testing.T) string { return natstest.ClusterURL(natstest.Cluster(t)) }, 3},
	} {
		t.Run(name, func(t *testing.T) {
			_, js := natstest.Connect(t, c.url(t))
			createStream(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: c.replicas, AllowDirect: true})
			checkStreamReads(t, js, kv.NewStream(js, "S"))
		})
	}
}

// createStream creates cfg, retrying while a fresh cluster settles.
func createStream(t *testing.T, js jetstream.JetStream, cfg jetstream.StreamConfig) {
	t.Helper()
	eventually(t, func() error {
		_, err := js.CreateStream(ctx(t), cfg)
		return err
	})
}

// checkStreamReads publishes five messages to s.a through pub and reads
// them back through st (a Stream of the stream "S" holding s.>).
func checkStreamReads(t *testing.T, pub jetstream.JetStream, st kv.Stream) {
	t.Helper()
	if _, err := st.Last(ctx(t), "s.a"); !errors.Is(err, record.ErrNotFound) || !errors.Is(err, jetstream.ErrMsgNotFound) {
		t.Fatalf("empty subject: %v", err)
	}
	for i := range 5 {
		msg := nats.NewMsg("s.a")
		msg.Data = []byte{byte('0' + i)}
		msg.Header.Set("Nats-Msg-Id", string(msg.Data))
		if _, err := pub.PublishMsg(ctx(t), msg); err != nil {
			t.Fatal(err)
		}
		got, err := st.Last(ctx(t), "s.a")
		if err != nil || string(got.Data) != string(msg.Data) || got.Header.Get("Nats-Msg-Id") != string(msg.Data) {
			t.Fatalf("last after publish %d: %+v %v", i, got, err)
		}
	}
	got, err := st.Get(ctx(t), 2)
	if err != nil || got.Sequence != 2 || string(got.Data) != "1" || got.Subject != "s.a" || got.Time.IsZero() {
		t.Fatalf("by sequence: %+v %v", got, err)
	}
	got, err = st.Next(ctx(t), "s.>", 3)
	if err != nil || got.Sequence != 3 {
		t.Fatalf("next from 3: %+v %v", got, err)
	}
	if _, err := st.Next(ctx(t), "s.a", 6); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("next past the end: %v", err)
	}
	if _, err := st.Get(ctx(t), 99); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("missing sequence: %v", err)
	}
	// A direct get by sequence: any replica that has the message answers
	// (so the cluster's may lack it for a moment: read until it is there).
	eventually(t, func() error {
		got, err = st.Direct(ctx(t), 2)
		return err
	})
	if got.Sequence != 2 || string(got.Data) != "1" || got.Subject != "s.a" || got.Time.IsZero() ||
		got.Header.Get("Nats-Msg-Id") != "1" {
		t.Fatalf("direct by sequence: %+v", got)
	}
	if _, err := st.Direct(ctx(t), 99); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("direct, missing sequence: %v", err)
	}
}

// TestStreamInvalid: arguments the server would refuse are refused first.
func TestStreamInvalid(t *testing.T) {
	t.Parallel()
	_, js := natstest.Connect(t, natstest.Server(t).ClientURL())
	st := kv.NewStream(js, "S")
	for name, read := range map[string]func(context.Context) error{
		"sequence 0":       func(c context.Context) error { _, err := st.Get(c, 0); return err },
		"direct, 0":        func(c context.Context) error { _, err := st.Direct(c, 0); return err },
		"last, no subject": func(c context.Context) error { _, err := st.Last(c, ""); return err },
		"next, no subject": func(c context.Context) error { _, err := st.Next(c, "", 1); return err },
		"zero Stream":      func(c context.Context) error { _, err := kv.Stream{}.Get(c, 1); return err },
		"zero Backlog":     func(c context.Context) error { _, err := kv.Backlog{}.After(c, []string{"a"}, 1); return err },
	} {
		if err := read(ctx(t)); !errors.Is(err, record.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := kv.NewStream(js, "NONE").Get(ctx(t), 1); !errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, record.ErrNotFound) {
		t.Errorf("missing stream: %v", err)
	}
}

// TestBacklog: what counts as a backlog for the handoff — only a later
// message on one of the session's own inbox subjects.
func TestBacklog(t *testing.T) {
	t.Parallel()
	s := natstest.Server(t)
	ensure(t, s.ClientURL(), 1)
	_, js := natstest.Connect(t, s.ClientURL())
	names := subjects.Default()
	publish := func(tok string) uint64 {
		t.Helper()
		ack, err := js.Publish(ctx(t), names.Inbox(tok), []byte(`{"cmd":"test"}`))
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	bl := kv.NewBacklog(js, names)
	id := uid("b")
	tokens := []string{id, "al-" + id}
	after := func(seq uint64) uint64 {
		t.Helper()
		got, err := bl.After(ctx(t), tokens, seq)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	early := publish("al-" + id)
	trigger := publish(id)
	if seq := after(trigger); seq != 0 {
		t.Fatalf("only the trigger (and an earlier %d): backlog %d", early, seq)
	}
	publish("other-" + id)
	if seq := after(trigger); seq != 0 {
		t.Fatalf("another session's command counted: %d", seq)
	}
	later := publish("al-" + id)
	publish(id)
	if seq := after(trigger); seq != later {
		t.Fatalf("backlog %d, want %d", seq, later)
	}
	if seq := after(early - 1); seq != early {
		t.Fatalf("from before the first: %d, want %d", seq, early)
	}
}
