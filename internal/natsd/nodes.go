package natsd

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Nodes is an in-process cluster (StartCluster) whose nodes can be stopped
// and started again, each with its name, store, client port and cluster
// port, so clients and peers find it where it was.
type Nodes struct {
	base    string
	mu      sync.Mutex
	servers []*server.Server
	ports   []int // client ports
	cports  []int // cluster ports
	routes  []string
}

// StartNodes starts an n-node cluster in dirs under base like StartCluster,
// keeping what Start needs to restart a node.
func StartNodes(base string, n int) (*Nodes, error) {
	servers, err := StartCluster(base, n, false)
	if err != nil {
		return nil, err
	}
	c := &Nodes{base: base, servers: servers}
	for _, s := range servers {
		c.ports = append(c.ports, s.Addr().(*net.TCPAddr).Port)
		cp := s.ClusterAddr().Port
		c.cports = append(c.cports, cp)
		c.routes = append(c.routes, fmt.Sprintf("nats://127.0.0.1:%d", cp))
	}
	return c, nil
}

// Servers are the current servers (a stopped node's entry is nil).
func (c *Nodes) Servers() []*server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.servers)
}

// URL lists every node's client URL (stable across restarts).
func (c *Nodes) URL() string {
	urls := make([]string, len(c.ports))
	for i, p := range c.ports {
		urls[i] = fmt.Sprintf("nats://127.0.0.1:%d", p)
	}
	return strings.Join(urls, ",")
}

// Stop shuts node i down and waits for it.
func (c *Nodes) Stop(i int) {
	c.mu.Lock()
	s := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	Shutdown(s)
}

// Start starts the stopped node i again with its name, store and ports, and
// waits until the cluster has a meta leader and every node is current.
func (c *Nodes) Start(i int, timeout time.Duration) error {
	cfg := NodeConfig(c.base, i, c.cports[i], c.routes, false)
	cfg.Port = c.ports[i]
	s, err := Start(cfg)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.servers[i] = s
	all := slices.Clone(c.servers)
	c.mu.Unlock()
	return WaitMetaLeader(all, timeout)
}

// Shutdown stops every node still running.
func (c *Nodes) Shutdown() {
	c.mu.Lock()
	defer c.mu.Unlock()
	Shutdown(c.servers...)
}
