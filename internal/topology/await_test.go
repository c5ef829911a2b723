package topology_test

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

// Await retries every error but an incompatible resource until its wait is
// over, and then returns it (here R3 on one server, which never passes; a
// cluster whose peer is briefly offline answers "no suitable peers" the
// same way and passes).
func TestAwaitRetriesPlacement(t *testing.T) {
	s := natstest.Server(t)
	_, js := natstest.Connect(t, s.ClientURL())
	var retried []error
	_, err := topology.Await(ctx(t), js, topology.Config{Replicas: 3}, 1500*time.Millisecond, func(err error) { retried = append(retried, err) })
	if err == nil || len(retried) < 2 {
		t.Fatalf("Await = %v after %d retries, want the placement error after several", err, len(retried))
	}
	t.Logf("%d retries, last: %v", len(retried), err)
}

// Await gives up at once on an incompatible resource: waiting cannot
// change it.
func TestAwaitIncompatibleIsFinal(t *testing.T) {
	s := natstest.Server(t)
	_, js := natstest.Connect(t, s.ClientURL())
	n := subjects.Default()
	if _, err := js.CreateStream(ctx(t), jetstream.StreamConfig{
		Name: n.InboxStream(), Subjects: []string{n.InboxAll()}, Retention: jetstream.WorkQueuePolicy,
	}); err != nil {
		t.Fatal(err)
	}
	retries := 0
	_, err := topology.Await(ctx(t), js, topology.Config{}, time.Minute, func(error) { retries++ })
	if !errors.Is(err, topology.ErrIncompatible) || retries != 0 {
		t.Fatalf("Await = %v after %d retries, want ErrIncompatible at once", err, retries)
	}
}
