package handoff_test

import (
	"testing"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
)

// TestClusterActivations: on a three-node cluster with R3 buckets (direct
// gets enabled, so a follower may answer a plain get with an older
// revision), the source talks to the sessions stream's leader and the
// candidate's responder to a follower. Each of 50 handoffs stages through
// the leader and is activated through the follower immediately after:
// none may be refused, because the candidate reads the expected revision
// with kv.SessionAt (a leader read that waits for it), never a direct get.
func TestClusterActivations(t *testing.T) {
	nodes := natstest.Cluster(t)
	_, js := natstest.Connect(t, natstest.ClusterURL(nodes))
	ensure(t, js, 3)
	info, err := js.Stream(testCtx(t), "KV_"+names.SessionsBucket())
	if err != nil {
		t.Fatal(err)
	}
	cfg := info.CachedInfo()
	if !cfg.Config.AllowDirect || cfg.Config.Replicas != 3 || cfg.Cluster == nil {
		t.Fatalf("sessions stream: direct=%v replicas=%d", cfg.Config.AllowDirect, cfg.Config.Replicas)
	}
	leader, follower := split(t, nodes, cfg.Cluster.Leader)
	src := connect(t, leader)
	cand := connect(t, follower)
	green := serve(t, cand.nc, cand.st, candDeployment)
	b := src.backend(t)
	txn := natsTxn(src)
	for i := range 50 {
		req := natsRequest(t, src, b)
		res, err := txn.Run(testCtx(t), req)
		if err != nil || res.Outcome != handoff.Moved {
			t.Fatalf("handoff %d: %+v (failure %v) %v", i, res.Outcome, res.Failure, err)
		}
	}
	green.mu.Lock()
	defer green.mu.Unlock()
	if len(green.runs) != 50 {
		t.Fatalf("%d activations", len(green.runs))
	}
}

// split returns the node named leader and another one.
func split(t *testing.T, nodes []*server.Server, leader string) (*server.Server, *server.Server) {
	t.Helper()
	var l, f *server.Server
	for _, s := range nodes {
		if s.Name() == leader {
			l = s
		} else if f == nil {
			f = s
		}
	}
	if l == nil || f == nil {
		t.Fatalf("leader %q not among the nodes", leader)
	}
	return l, f
}

func connect(t *testing.T, s *server.Server) *natsServer {
	nc, js := natstest.Connect(t, s.ClientURL())
	return &natsServer{url: s.ClientURL(), nc: nc, js: js, st: openStore(t, js)}
}
