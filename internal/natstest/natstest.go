// Package natstest starts real embedded nats-servers for tests: one server on
// a random port with a temporary store, or an in-process three-node cluster.
// It is imported only by tests.
package natstest

import (
	"net"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natsd"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Server starts one JetStream server on a random port with a temporary store;
// it is shut down when the test ends.
func Server(t testing.TB) *server.Server {
	t.Helper()
	return ServerIn(t, t.TempDir())
}

// ServerIn starts a server on a random port with the store in dir.
func ServerIn(t testing.TB, dir string) *server.Server {
	t.Helper()
	return start(t, natsd.Config{Dir: dir, Port: -1, Name: "test"})
}

// Restart shuts s down and starts a new server with the store in dir (the
// one s used) on the same client port, so connected clients reconnect to it.
func Restart(t testing.TB, s *server.Server, dir string) *server.Server {
	t.Helper()
	port := s.Addr().(*net.TCPAddr).Port
	natsd.Shutdown(s)
	return start(t, natsd.Config{Dir: dir, Port: port, Name: "test"})
}

func start(t testing.TB, cfg natsd.Config) *server.Server {
	t.Helper()
	s, err := natsd.Start(cfg)
	if err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	t.Cleanup(func() { natsd.Shutdown(s) })
	return s
}

// Cluster starts a three-node in-process cluster; it is shut down when the
// test ends.
func Cluster(t testing.TB) []*server.Server {
	t.Helper()
	nodes, err := natsd.StartCluster(t.TempDir(), 3, false)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(func() { natsd.Shutdown(nodes...) })
	return nodes
}

// Connect opens a TCP connection to url with a JetStream context; both are
// closed when the test ends. The client reconnects forever, so it survives a
// server restart.
func Connect(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// ClusterURL is a client URL listing every node of a cluster.
func ClusterURL(nodes []*server.Server) string {
	url := ""
	for i, s := range nodes {
		if i > 0 {
			url += ","
		}
		url += s.ClientURL()
	}
	return url
}

// Nodes is an in-process three-node cluster whose nodes a test can stop and
// start again (natsd.Nodes).
type Nodes = natsd.Nodes

// RestartableCluster starts a three-node in-process cluster like Cluster,
// keeping what is needed to restart a node; every node still running is
// shut down when the test ends.
func RestartableCluster(t testing.TB) *Nodes {
	t.Helper()
	c, err := natsd.StartNodes(t.TempDir(), 3)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(c.Shutdown)
	return c
}

// StreamLeader returns the index of the node leading stream (nil entries
// skipped), polling for up to 10 s.
func StreamLeader(t testing.TB, nodes []*server.Server, stream string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for i, s := range nodes {
			if s != nil && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
				return i
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no leader of %s", stream)
	return -1
}

// NewLeader polls nodes (nil entries skipped) until one leads stream and
// returns when it first saw it (the deadline if none did).
func NewLeader(nodes []*server.Server, stream string, deadline time.Time) time.Time {
	for time.Now().Before(deadline) {
		for _, s := range nodes {
			if s != nil && s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
				return time.Now()
			}
		}
		time.Sleep(time.Millisecond)
	}
	return deadline
}
