package kv_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

// opener opens a Store through a new connection to node (node is ignored by
// a single server; on the cluster consecutive nodes are different servers).
type opener func(t *testing.T, node int) *kv.Store

// TestSingleServer runs the conformance suite on one embedded server.
func TestSingleServer(t *testing.T) {
	s := natstest.Server(t)
	ensure(t, s.ClientURL(), 1)
	runSuite(t, func(t *testing.T, _ int) *kv.Store { return open(t, s.ClientURL()) })
}

// TestCluster runs the same suite on a three-node cluster with R3 buckets,
// each Store connected to one node.
// It does not run in parallel with TestSingleServer: on two cores the
// contention delays lease renewals and Raft heartbeats past their TTLs.
func TestCluster(t *testing.T) {
	nodes := natstest.Cluster(t)
	ensure(t, natstest.ClusterURL(nodes), 3)
	runSuite(t, func(t *testing.T, node int) *kv.Store { return open(t, nodes[node%len(nodes)].ClientURL()) })
	t.Run("leader get", func(t *testing.T) { testLeaderGet(t, nodes) })
}

func runSuite(t *testing.T, open opener) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, opener)
	}{
		{"session lifecycle", testSessionLifecycle},
		{"session validation", testSessionValidation},
		{"session claim race", testSessionClaimRace},
		{"alias claim race", testAliasClaimRace},
		{"hook lifecycle", testHookLifecycle},
		{"hook validation", testHookValidation},
		{"children", testChildren},
		{"markers", testMarkers},
		{"deployments", testDeployments},
		{"agents", testAgents},
		{"fleet", testFleet},
		{"advertise", testAdvertise},
		{"index", testIndex},
		{"sweep indexes", testSweepIndexes},
		{"settle", testSettle},
		{"session at across nodes", testSessionAt},
		{"list sessions", testListSessions},
		{"get lease", testGetLease},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	}
	// Last: on a fresh cluster the Raft groups are still settling.
	t.Run("leases", func(t *testing.T) { leaseSuite(t, open) })
}

func ensure(t *testing.T, url string, replicas int) {
	t.Helper()
	_, js := natstest.Connect(t, url)
	ensureJS(t, js, replicas)
}

func ensureJS(t *testing.T, js jetstream.JetStream, replicas int) {
	t.Helper()
	// A fresh cluster may not know all its peers yet ("no suitable peers
	// for placement"), and on a loaded two-core machine its meta leader can
	// take long to answer: each attempt gets 10 s, retried for a minute.
	deadline := time.Now().Add(time.Minute)
	for {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := topology.Ensure(c, js, topology.Config{Replicas: replicas})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("topology: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ownersHistoryOne(t, js)
}

// ownersHistoryOne sets History 1 on baton_owners if topology did not. With
// delete markers on and History > 1, nats-server 2.15.2 raises every message
// TTL to the marker TTL (5 min), so a lease of seconds cannot expire in time
// (see minLeaseTTL in store.go). Once topology creates the bucket with
// History 1 this is a no-op.
func ownersHistoryOne(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	h, err := js.KeyValue(ctx(t), subjects.Default().OwnersBucket())
	if err != nil {
		t.Fatal(err)
	}
	st, err := h.Status(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.(*jetstream.KeyValueBucketStatus).Config()
	if cfg.History == 1 {
		return
	}
	cfg.History = 1
	if _, err := js.UpdateKeyValue(ctx(t), cfg); err != nil {
		t.Fatalf("owners bucket history 1: %v", err)
	}
}

func open(t *testing.T, url string) *kv.Store {
	t.Helper()
	_, js := natstest.Connect(t, url)
	st, err := kv.Open(ctx(t), js, subjects.Default())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return st
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	return c
}

var seq atomic.Uint64

// uid is a fresh ID valid as a session, process or deployment ID.
func uid(kind string) string {
	return fmt.Sprintf("%s-%d-%d", kind, time.Now().UnixNano()%1e9, seq.Add(1))
}

func sessionRec(id, run string) record.SessionRecord {
	return record.SessionRecord{
		SessionID: id, OwnerRunID: run, DeploymentID: "dep-a", Epoch: 1, OwnerProcess: "p1",
		State: record.StateActive, Consumer: subjects.Consumer(id, 1), WireV: 1,
		Writer: run, WriteCounter: 1, Checkpoint: []byte(`{"applied":0}`),
	}
}

func mustErr(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("want %v, got %v", want, err)
	}
}

func mustOwned(t *testing.T, err error) *record.OwnedError {
	t.Helper()
	var oe *record.OwnedError
	if !errors.As(err, &oe) || !errors.Is(err, record.ErrExists) || !errors.Is(err, record.ErrConflict) {
		t.Fatalf("want *record.OwnedError matching record.ErrExists and record.ErrConflict, got %T %v", err, err)
	}
	return oe
}

// TestLeaseTTLStretched: on an owners bucket with History > 1 and 5-minute
// delete markers the server would stretch a short lease TTL to 5 minutes;
// kv refuses the TTL instead of writing a lease that outlives its holder.
func TestLeaseTTLStretched(t *testing.T) {
	t.Parallel()
	s := natstest.Server(t)
	_, js := natstest.Connect(t, s.ClientURL())
	names, err := subjects.New("hist")
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []jetstream.KeyValueConfig{
		{Bucket: names.SessionsBucket()}, {Bucket: names.HooksBucket()},
		{Bucket: names.OwnersBucket(), History: 4, LimitMarkerTTL: 5 * time.Minute},
	} {
		if _, err := js.CreateKeyValue(ctx(t), cfg); err != nil {
			t.Fatal(err)
		}
	}
	st, err := kv.Open(ctx(t), js, names)
	if err != nil {
		t.Fatal(err)
	}
	_, err = st.AcquireLease(ctx(t), kv.Lease{ProcessID: "p1", DeploymentID: "d1"}, 2*time.Second)
	mustErr(t, err, record.ErrInvalid)
	if _, err := st.AcquireLease(ctx(t), kv.Lease{ProcessID: "p1", DeploymentID: "d1"}, 5*time.Minute); err != nil {
		t.Fatalf("a TTL at the marker TTL: %v", err)
	}
}

func TestOpenMissingBuckets(t *testing.T) {
	t.Parallel()
	s := natstest.Server(t)
	_, js := natstest.Connect(t, s.ClientURL())
	_, err := kv.Open(ctx(t), js, subjects.Default())
	mustErr(t, err, jetstream.ErrBucketNotFound)
}

// eventually polls check until it returns nil, failing after 5 s.
func eventually(t *testing.T, check func() error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
