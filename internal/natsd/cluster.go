package natsd

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StartCluster starts n in-process nodes in dirs under base, routed to each
// other on free loopback ports, and waits for a JetStream meta leader.
func StartCluster(base string, n int, syncAlways bool) ([]*server.Server, error) {
	ports, err := freePorts(n)
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
	return nodes, nil
}

// NodeConfig is the Config of node i of a cluster started by StartCluster, so
// a test can restart one node with the same identity and store.
func NodeConfig(base string, i, clusterPort int, routes []string, syncAlways bool) Config {
	return Config{
		Dir:        filepath.Join(base, fmt.Sprintf("n%d", i+1)),
		Port:       -1,
		Name:       fmt.Sprintf("n%d", i+1),
		SyncAlways: syncAlways,
		Cluster:    &Cluster{Name: "baton", Port: clusterPort, Routes: routes},
	}
}

// WaitMetaLeader polls until one node reports JetStream meta leadership.
func WaitMetaLeader(nodes []*server.Server, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		leader, current := false, 0
		for _, s := range nodes {
			if s.Running() && s.JetStreamIsLeader() {
				leader = true
			}
			if s.Running() && s.JetStreamIsCurrent() {
				current++
			}
		}
		if leader && current == len(nodes) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return errors.New("natsd: no JetStream meta leader")
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

func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	ls := make([]net.Listener, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("natsd: free port: %w", err)
		}
		ls[i] = l
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		l.Close()
	}
	return ports, nil
}
