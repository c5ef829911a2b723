package topology_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestEnsureTwiceIsNoop(t *testing.T) {
	s := natstest.Server(t)
	_, js := natstest.Connect(t, s.ClientURL())
	first, err := topology.Ensure(ctx(t), js, topology.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Changes) != 10 {
		t.Fatalf("first ensure: want 10 creations, got %v", first.Changes)
	}
	before := streamConfigs(t, js)
	second, err := topology.Ensure(ctx(t), js, topology.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Changes) != 0 {
		t.Fatalf("second ensure changed %v", second.Changes)
	}
	after := streamConfigs(t, js)
	for name, b := range before {
		a := after[name]
		if !reflect.DeepEqual(a.Config, b.Config) || !a.Created.Equal(b.Created) {
			t.Errorf("%s changed:\n%+v\n%+v", name, b.Config, a.Config)
		}
	}
	inbox := first.Inbox.CachedInfo().Config
	if inbox.Retention != jetstream.LimitsPolicy || !inbox.AllowMsgSchedules || !inbox.AllowMsgTTL || inbox.MaxConsumers != topology.DefaultMaxConsumers {
		t.Fatalf("inbox config: %+v", inbox)
	}
}

func streamConfigs(t *testing.T, js jetstream.JetStream) map[string]*jetstream.StreamInfo {
	out := map[string]*jetstream.StreamInfo{}
	l := js.ListStreams(ctx(t))
	for info := range l.Info() {
		out[info.Config.Name] = info
	}
	if l.Err() != nil {
		t.Fatal(l.Err())
	}
	if len(out) != 10 {
		t.Fatalf("want 10 streams, got %d: %v", len(out), out)
	}
	return out
}

func TestRaisedLimitAppliedInPlace(t *testing.T) {
	s := natstest.Server(t)
	_, js := natstest.Connect(t, s.ClientURL())
	if _, err := topology.Ensure(ctx(t), js, topology.Config{MaxConsumers: 2000}); err != nil {
		t.Fatal(err)
	}
	n := subjects.Default()
	if _, err := js.Publish(ctx(t), n.Inbox("keep"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	top, err := topology.Ensure(ctx(t), js, topology.Config{MaxConsumers: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Changes) != 2 || !strings.Contains(top.Changes[0], "max_consumers") {
		t.Fatalf("changes: %v", top.Changes)
	}
	info, err := top.Inbox.Info(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.Config.MaxConsumers != 5000 || info.State.Msgs != 1 {
		t.Fatalf("after update: max_consumers=%d msgs=%d", info.Config.MaxConsumers, info.State.Msgs)
	}
}

func TestAddedSubjectAppliedInPlace(t *testing.T) {
	s := natstest.Server(t)
	_, js := natstest.Connect(t, s.ClientURL())
	n := subjects.Default()
	// An older Baton that only had the inbox subjects.
	_, err := js.CreateStream(ctx(t), jetstream.StreamConfig{
		Name: n.InboxStream(), Subjects: []string{n.InboxAll()}, Retention: jetstream.LimitsPolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	top, err := topology.Ensure(ctx(t), js, topology.Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := top.Inbox.CachedInfo().Config
	if len(got.Subjects) != 2 || !got.AllowMsgSchedules {
		t.Fatalf("inbox not upgraded: %+v", got)
	}
}

func TestOtherRetentionIsNamedError(t *testing.T) {
	s := natstest.Server(t)
	_, js := natstest.Connect(t, s.ClientURL())
	n := subjects.Default()
	_, err := js.CreateStream(ctx(t), jetstream.StreamConfig{
		Name: n.InboxStream(), Subjects: []string{n.InboxAll()}, Retention: jetstream.WorkQueuePolicy,
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = topology.Ensure(ctx(t), js, topology.Config{})
	var ie *topology.IncompatibleError
	if !errors.As(err, &ie) || !errors.Is(err, topology.ErrIncompatible) {
		t.Fatalf("want IncompatibleError, got %v", err)
	}
	if ie.Field != "retention" || ie.Resource != "BATON_INBOX" || !strings.Contains(err.Error(), "retention") {
		t.Fatalf("error does not name the field: %v", err)
	}
	info, err := js.Stream(ctx(t), n.InboxStream())
	if err != nil || info.CachedInfo().Config.Retention != jetstream.WorkQueuePolicy {
		t.Fatalf("existing stream was changed: %v", err)
	}
}

func TestEnsureOnClusterR3(t *testing.T) {
	nodes := natstest.Cluster(t)
	_, js := natstest.Connect(t, natstest.ClusterURL(nodes))
	top, err := topology.Ensure(ctx(t), js, topology.Config{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if r := top.Inbox.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("inbox replicas %d", r)
	}
	again, err := topology.Ensure(ctx(t), js, topology.Config{Replicas: 3})
	if err != nil || len(again.Changes) != 0 {
		t.Fatalf("second ensure on cluster: %v %v", again, err)
	}
}
