package natsd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/baton-rt/baton/internal/freeport"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterAttempts bounds StartCluster's starts; nodeReadyTimeout is how
// long each node of an attempt may take to accept connections.
var (
	clusterAttempts  = 3
	nodeReadyTimeout = 30 * time.Second
)

// StartCluster starts n in-process nodes in dirs under base, routed to each
// other on free loopback ports, and waits for a JetStream meta leader.
//
// The free ports are found by listening and closing, so another process
// (a second make test, say) can take one before its node binds it; the
// node then never listens on it and is not ready. A node not ready starts
// the whole cluster again on other ports, up to clusterAttempts times.
func StartCluster(base string, n int, syncAlways bool) ([]*server.Server, error) {
	var err error
	for range clusterAttempts {
		var nodes []*server.Server
		if nodes, err = startCluster(base, n, syncAlways); !errors.Is(err, ErrNotReady) {
			return nodes, err
		}
		for i := range n { // a fresh store for the next attempt
			_ = os.RemoveAll(NodeConfig(base, i, 0, nil, false).Dir)
		}
	}
	return nil, err
}

// startCluster is one attempt of StartCluster.
func startCluster(base string, n int, syncAlways bool) ([]*server.Server, error) {
	ports, err := freePortsFn(n)
	if err != nil {
		return nil, err
	}
	routes := make([]string, n)
	for i, p := range ports {
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(p)
	}
	nodes := make([]*server.Server, 0, n)
	cfgs := make([]Config, n)
	for i := range n {
		cfgs[i] = NodeConfig(base, i, ports[i], routes, syncAlways)
		s, err := Launch(cfgs[i])
		if err != nil {
			Shutdown(nodes...)
			return nil, err
		}
		nodes = append(nodes, s)
	}
	for i, s := range nodes {
		if err := WaitReady(s, cfgs[i]); err != nil {
			Shutdown(nodes...)
			return nil, err
		}
	}
	if err := WaitMetaLeader(nodes, 20*time.Second); err != nil {
		Shutdown(nodes...)
		return nil, err
	}
	if err := ProbePlacement(nodes[0].ClientURL(), n, jetstream.FileStorage, 3, 20*time.Second); err != nil {
		Shutdown(nodes...)
		return nil, err
	}
	return nodes, nil
}

// ProbePlacement creates (and deletes) a stream of n replicas in storage
// until the cluster at url places one inARow times in a row, or timeout
// passes. A meta leader that sees every peer online can still refuse a
// placement for a moment ("no suitable peers for placement, peer offline":
// a (re)joined peer's JetStream configuration or stats not yet received),
// and one success can be a placement that happened to leave that peer out;
// tests creating replicated streams on a fresh cluster met both under load.
func ProbePlacement(url string, n int, storage jetstream.StorageType, inARow int, timeout time.Duration) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return fmt.Errorf("natsd: probe: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("natsd: probe: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for ok := 0; ok < inARow; {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "NATSD_PROBE", Subjects: []string{"natsd.probe"},
			Replicas: n, Storage: storage})
		if err == nil {
			err = js.DeleteStream(ctx, "NATSD_PROBE")
		}
		cancel()
		if err == nil {
			ok++
			continue
		}
		ok = 0
		if time.Now().After(deadline) {
			return fmt.Errorf("natsd: the cluster places no stream of %d replicas: %w", n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// NodeConfig is the Config of node i of a cluster started by StartCluster, so
// a test can restart one node with the same identity and store.
func NodeConfig(base string, i, clusterPort int, routes []string, syncAlways bool) Config {
	return Config{
		Dir:          filepath.Join(base, fmt.Sprintf("n%d", i+1)),
		Port:         -1,
		Name:         fmt.Sprintf("n%d", i+1),
		SyncAlways:   syncAlways,
		Cluster:      &Cluster{Name: "baton", Port: clusterPort, Routes: routes},
		ReadyTimeout: nodeReadyTimeout,
	}
}

// WaitMetaLeader polls until one node reports JetStream meta leadership,
// every node is current, and the leader sees every node online with its
// stats: before that, a stream or bucket of more than one replica can be
// refused ("no suitable peers for placement, peer offline"), which a fresh
// cluster on a loaded machine showed.
func WaitMetaLeader(nodes []*server.Server, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if metaReady(nodes) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("natsd: no JetStream meta leader seeing every node online")
}

// metaReady reports whether nodes has a meta leader that sees every
// running node online, and every node is current.
func metaReady(nodes []*server.Server) bool {
	var leader *server.Server
	running, current := 0, 0
	for _, s := range nodes {
		if s == nil || !s.Running() {
			continue
		}
		running++
		if s.JetStreamIsLeader() {
			leader = s
		}
		if s.JetStreamIsCurrent() {
			current++
		}
	}
	return leader != nil && current == len(nodes) && len(leader.JetStreamClusterPeers()) == running
}

// Shutdown stops every server and waits for it.
func Shutdown(nodes ...*server.Server) {
	for _, s := range nodes {
		if s != nil {
			s.Shutdown()
			s.WaitForShutdown()
		}
	}
}

// freePortsFn finds a cluster's ports (a test stands in a taken one).
var freePortsFn = freePorts

// freePorts picks n ports below the ephemeral range (internal/freeport):
// a node restarts on its ports, which nothing else may take meanwhile.
func freePorts(n int) ([]int, error) {
	ports, err := freeport.Pick(n)
	if err != nil {
		return nil, fmt.Errorf("natsd: free port: %w", err)
	}
	return ports, nil
}
