package handoff_test

import (
	"context"
	"errors"
	"github.com/baton-rt/baton/internal/failpoint"
	"testing"
	"time"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestClusterActivations: on a three-node cluster with R3 buckets (direct
// gets enabled, so a follower may answer a plain get with an older
// revision), the source talks to the sessions stream's leader and the
// candidate's responder to a follower. Each of 50 handoffs stages through
// the leader and is activated through the follower immediately after:
// none may be refused. The candidate reads the record as written at the
// expected revision by a direct get of that sequence (kv.SessionWritten),
// which a follower answers right or not at all (then the leader read of
// kv.SessionAt, which waits for it), and the marker as a hint that a
// follower may not have yet (then the leader's).
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
	// The candidate subscribed on another node: its interest reaches the
	// source's node over the routes a moment later (longer on a loaded
	// machine), and a start sent before meets "no responders".
	waitResponders(t, src.nc, names.Start(candDeployment))
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

// TestHandoffAfterLeaderStop: the handoff's stage write lands, then the
// node leading the sessions stream stops before the source sees the
// answer (the reply is dropped), so the source settles the write by a
// leader read while the stream has no leader. The source and the candidate
// are connected to the two nodes that stay up, and the stopped node leads
// no other stream (leadOnly). The handoff must complete
// (Moved): the settle read waits for the new leader instead of failing at
// the resolve timeout. The figures are logged, not asserted.
func TestHandoffAfterLeaderStop(t *testing.T) {
	c := natstest.RestartableCluster(t)
	_, js := natstest.Connect(t, c.URL())
	ensure(t, js, 3)
	stream := "KV_" + names.SessionsBucket()
	lead := natstest.StreamLeader(t, c.Servers(), stream)
	leadOnly(t, js, c.Servers(), lead, stream)
	survivors := c.Servers()
	survivors[lead] = nil
	src := connect(t, survivors[(lead+1)%3])
	cand := connect(t, survivors[(lead+2)%3])
	green := serve(t, cand.nc, cand.st, candDeployment)
	b := src.backend(t)
	req := natsRequest(t, src, b)

	var killed time.Time
	elected := make(chan time.Time, 1)
	txn := natsTxn(src)
	txn.Failpoints = stepPoints(failpoint.HandoffSourceBefore, failpoint.HandoffSourceAfter, nil, func(s handoff.Step) error {
		if s != handoff.StepStage || !killed.IsZero() {
			return nil
		}
		killed = time.Now()
		go func() { elected <- natstest.NewLeader(survivors, stream, killed.Add(time.Minute)) }()
		c.Stop(lead)
		return handoff.ErrReplyLost
	})
	// As the owner runs it: no deadline but the transaction's own timeouts.
	res, err := txn.Run(context.Background(), req)
	done := time.Now()
	if err != nil || res.Outcome != handoff.Moved {
		t.Fatalf("handoff after the leader stopped (%s): %v (failure %+v, steps %v) %v", done.Sub(killed), res.Outcome, res.Failure, res.Steps, err)
	}
	e := <-elected
	t.Logf("the handoff completed %s after the stop began, %s after the new leader was seen (elected %s after the stop began); steps %v",
		done.Sub(killed), done.Sub(e), e.Sub(killed), res.Steps)
	green.mu.Lock()
	defer green.mu.Unlock()
	if len(green.runs) != 1 {
		t.Fatalf("%d activations", len(green.runs))
	}
}

// leadOnly makes node the leader of no stream of the topology but keep:
// each other stream it leads is asked to step down until another node
// leads it. TestHandoffAfterLeaderStop stops node to take the sessions
// stream's leader away; the handoff's marker (the hooks bucket) or index
// write finding its own stream leaderless at that moment would fail the
// handoff for another reason than the settle read the test is about.
func leadOnly(t *testing.T, js jetstream.JetStream, nodes []*server.Server, node int, keep string) {
	t.Helper()
	ctx := testCtx(t)
	names := js.StreamNames(ctx)
	var streams []string
	for name := range names.Name() {
		streams = append(streams, name)
	}
	if err := names.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range streams {
		if name == keep {
			continue
		}
		deadline, stepped := time.Now().Add(30*time.Second), false
		for natstest.StreamLeader(t, nodes, name) == node {
			if time.Now().After(deadline) {
				t.Fatalf("node %d still leads %s", node, name)
			}
			_, _ = js.Conn().Request(stepDownSubject+name, nil, 2*time.Second)
			stepped = true
			time.Sleep(100 * time.Millisecond) // the election's pace, then the poll above
		}
		if stepped {
			t.Logf("%s's leader stepped down from node %d", name, node)
		}
	}
}

// stepDownSubject asks a stream's leader to step down (JetStream API).
const stepDownSubject = "$JS.API.STREAM.LEADER.STEPDOWN."

// waitResponders polls until a request on subject from nc reaches a
// responder (any answer will do).
func waitResponders(t *testing.T, nc *nats.Conn, subject string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := nc.Request(subject, []byte(`{}`), time.Second)
		if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no responders on %s: %v", subject, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
