package natsproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/baton-rt/baton/internal/freeport"
	"github.com/baton-rt/baton/internal/natsd"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/nats-io/nats.go/jetstream"
)

// ServerPkg is the main package of the pinned nats-server.
const ServerPkg = "github.com/nats-io/nats-server/v2"

// Cluster is n nats-server processes routed to each other.
type Cluster struct {
	bin   string
	base  string
	mu    sync.Mutex
	nodes []*node
}

type node struct {
	name  string
	conf  string
	port  int // client port
	cport int // cluster port
	mport int // monitoring port
	cmd   *exec.Cmd
	done  chan struct{}
}

// TB is what natsproc needs of a test (testing.TB satisfies it).
type TB interface {
	proctest.TB
	Failed() bool
	Logf(format string, args ...any)
}

// Start builds the server (once per test binary), starts an n-node cluster
// in a temporary directory of t, and waits until it is ready (WaitReady).
// Every process is killed when the test ends; if the test failed, the last
// lines of each node's log are logged.
func Start(t TB, dir string, n int) *Cluster {
	t.Helper()
	c := &Cluster{bin: proctest.BuildNoRace(t, ServerPkg), base: dir}
	ports, err := freePorts(3 * n)
	if err != nil {
		t.Fatalf("natsproc: %v", err)
	}
	routes := make([]string, n)
	for i := range n {
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i])
	}
	for i := range n {
		nd := &node{name: fmt.Sprintf("n%d", i+1), port: ports[i], cport: ports[n+i], mport: ports[2*n+i]}
		nd.conf = filepath.Join(dir, nd.name+".conf")
		if err := os.WriteFile(nd.conf, []byte(config(nd, filepath.Join(dir, nd.name), routes)), 0o644); err != nil {
			t.Fatalf("natsproc: %v", err)
		}
		c.nodes = append(c.nodes, nd)
	}
	t.Cleanup(func() {
		c.KillAll()
		if t.Failed() {
			for i := range c.nodes {
				t.Logf("---- nats-server %s (last lines of %s) ----\n%s", c.Name(i), c.LogPath(i), tail(c.LogPath(i), 40))
			}
		}
	})
	for i := range n {
		if err := c.launch(i); err != nil {
			t.Fatalf("natsproc: %v", err)
		}
	}
	if err := c.WaitReady(60 * time.Second); err != nil {
		t.Fatalf("natsproc: %v", err)
	}
	return c
}

// config is node nd's configuration file.
func config(nd *node, store string, routes []string) string {
	return fmt.Sprintf(`server_name: %s
listen: 127.0.0.1:%d
http: 127.0.0.1:%d
cluster {
  name: baton
  listen: 127.0.0.1:%d
  routes: [
    %s
  ]
}
jetstream {
  store_dir: %q
  max_file_store: 1GB
  max_memory_store: 256MB
  limits { default_max_consumers: 10000 }
}
`, nd.name, nd.port, nd.mport, nd.cport, strings.Join(routes, "\n    "), store)
}

// launch starts node i's process.
func (c *Cluster) launch(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	nd := c.nodes[i]
	if nd.cmd != nil {
		return fmt.Errorf("natsproc: node %d already running", i)
	}
	lf, err := os.OpenFile(filepath.Join(c.base, nd.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.bin, "-c", nd.conf)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("natsproc: start %s: %w", nd.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); lf.Close(); close(done) }()
	nd.cmd, nd.done = cmd, done
	return nil
}

// N is the number of nodes.
func (c *Cluster) N() int { return len(c.nodes) }

// URL lists every node's client URL, comma-separated (stable across
// restarts).
func (c *Cluster) URL() string {
	urls := make([]string, len(c.nodes))
	for i := range c.nodes {
		urls[i] = c.NodeURL(i)
	}
	return strings.Join(urls, ",")
}

// NodeURL is node i's client URL.
func (c *Cluster) NodeURL(i int) string {
	return fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[i].port)
}

// Name is node i's server name (n1, n2, ...).
func (c *Cluster) Name(i int) string { return c.nodes[i].name }

// Running reports whether node i's process runs.
func (c *Cluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].cmd != nil
}

// Kill SIGKILLs node i and waits for the process to end: no goodbye to its
// peers, no leadership handed over.
func (c *Cluster) Kill(i int) error { return c.signal(i, syscall.SIGKILL, 10*time.Second) }

// Stop SIGTERMs node i (nats-server's graceful shutdown: it hands its
// leaderships over) and waits for the process to end.
func (c *Cluster) Stop(i int) error { return c.signal(i, syscall.SIGTERM, 30*time.Second) }

func (c *Cluster) signal(i int, sig syscall.Signal, wait time.Duration) error {
	c.mu.Lock()
	nd := c.nodes[i]
	cmd, done := nd.cmd, nd.done
	c.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%w: %s", ErrNotRunning, nd.name)
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
	}
	c.mu.Lock()
	nd.cmd, nd.done = nil, nil
	c.mu.Unlock()
	return nil
}

// Restart starts the stopped node i again with its configuration, store and
// ports, and waits until its server and JetStream run. It does not wait
// for the node to catch up: WaitReady does.
func (c *Cluster) Restart(i int) error {
	if err := c.launch(i); err != nil {
		return err
	}
	return c.waitHealthz(i, "?js-server-only=true", 60*time.Second)
}

// KillAll SIGKILLs every running node (the test's cleanup).
func (c *Cluster) KillAll() {
	for i := range c.nodes {
		if c.Running(i) {
			_ = c.Kill(i)
		}
	}
}

// WaitReady waits until every running node reports healthy JetStream
// (/healthz: the meta group and every stream and consumer replica it
// holds are current), and the cluster places a stream of as many replicas
// as nodes run.
func (c *Cluster) WaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	running := 0
	for i := range c.nodes {
		if !c.Running(i) {
			continue
		}
		running++
		if err := c.waitHealthz(i, "", time.Until(deadline)); err != nil {
			return err
		}
	}
	for {
		err := c.metaReady(running)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A file stream placed three times in a row: one success can be a
	// placement that left a (re)joined peer out.
	return natsd.ProbePlacement(c.URL(), running, jetstream.FileStorage, 3, time.Until(deadline))
}

// jsz is what metaReady reads of /jsz.
type jsz struct {
	Meta struct {
		Leader   string `json:"leader"`
		Replicas []struct {
			Name    string `json:"name"`
			Current bool   `json:"current"`
			Offline bool   `json:"offline"`
		} `json:"replicas"`
	} `json:"meta_cluster"`
}

// metaReady checks, on the node leading the JetStream meta group, that it
// sees every other running node current and online: a peer it counts
// offline is refused as a stream's replica ("no suitable peers for
// placement, peer offline").
func (c *Cluster) metaReady(running int) error {
	for i, nd := range c.nodes {
		if !c.Running(i) {
			continue
		}
		ok, body := get(fmt.Sprintf("http://127.0.0.1:%d/jsz", nd.mport))
		var j jsz
		if !ok || json.Unmarshal([]byte(body), &j) != nil || j.Meta.Leader != nd.name {
			continue
		}
		n := 0
		for _, r := range j.Meta.Replicas {
			if r.Current && !r.Offline {
				n++
			}
		}
		if n == running-1 {
			return nil
		}
		return fmt.Errorf("natsproc: meta leader %s sees %d of %d other nodes current and online", nd.name, n, running-1)
	}
	return errors.New("natsproc: no node reports itself the JetStream meta leader")
}

// waitHealthz polls node i's /healthz (with query q) until it answers 200.
func (c *Cluster) waitHealthz(i int, q string, timeout time.Duration) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz%s", c.nodes[i].mport, q)
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, body := get(url)
		if ok {
			return nil
		}
		last = body
		if time.Now().After(deadline) {
			return fmt.Errorf("natsproc: %s not healthy within %s: %s", c.nodes[i].name, timeout, last)
		}
		if !c.Running(i) {
			return fmt.Errorf("%w: %s", ErrNotRunning, c.nodes[i].name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Leader is the index of the node leading stream (a KV bucket's stream is
// KV_<bucket>), as StreamInfo reports it through js.
func (c *Cluster) Leader(ctx context.Context, js jetstream.JetStream, stream string) (int, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return -1, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return -1, err
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return -1, fmt.Errorf("%w: %s", ErrNoLeader, stream)
	}
	for i, nd := range c.nodes {
		if nd.name == info.Cluster.Leader {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%w: %s names %q", ErrNoLeader, stream, info.Cluster.Leader)
}

// Current reports whether every stream of js's account has a leader and
// every replica of it current: a fault injected before that meets Raft
// groups still forming (a follower that has not caught up does not stand
// for election, so losing a new group's leader stalls it).
func (c *Cluster) Current(ctx context.Context, js jetstream.JetStream) error {
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if info.Cluster == nil || info.Cluster.Leader == "" {
			return fmt.Errorf("%w: %s", ErrNoLeader, name)
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return fmt.Errorf("natsproc: stream %s: replica %s not current", name, r.Name)
			}
		}
	}
	return names.Err()
}

// LogPath is node i's log file (stdout and stderr of every run).
func (c *Cluster) LogPath(i int) string { return filepath.Join(c.base, c.nodes[i].name+".log") }

// freePorts picks n ports below the ephemeral range (internal/freeport):
// a node restarts on its ports, which nothing else may take meanwhile.
func freePorts(n int) ([]int, error) {
	ports, err := freeport.Pick(n)
	if err != nil {
		return nil, fmt.Errorf("natsproc: free port: %w", err)
	}
	return ports, nil
}
