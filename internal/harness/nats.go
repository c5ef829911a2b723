package harness

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/baton-rt/baton/internal/freeport"
	"github.com/baton-rt/baton/internal/natsd"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Server is one embedded JetStream server on a loopback port with its store
// in a directory; Restart brings it back on the same port and store, so
// connected clients reconnect to it.
type Server struct {
	dir  string
	port int
	mu   sync.Mutex
	srv  *server.Server
}

// StartServer starts a server on a free port with the store in dir: a
// port below the ephemeral range (internal/freeport), which nothing else
// takes while Restart has it down.
func StartServer(dir string) (*Server, error) {
	ports, err := freeport.Pick(1)
	if err != nil {
		return nil, err
	}
	s, err := natsd.Start(natsd.Config{Dir: dir, Port: ports[0], Name: "test"})
	if err != nil {
		return nil, fmt.Errorf("start nats-server: %w", err)
	}
	return &Server{dir: dir, port: s.Addr().(*net.TCPAddr).Port, srv: s}, nil
}

// URL is the server's client URL (stable across restarts).
func (s *Server) URL() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// Dir is the store directory.
func (s *Server) Dir() string { return s.dir }

// NATS is the running server (nil between Restart's shutdown and start).
func (s *Server) NATS() *server.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.srv
}

// Restart shuts the server down, stays down for down (the outage a test
// wants; 0 for none) and starts it again on the same port and store.
func (s *Server) Restart(down time.Duration) error {
	s.Shutdown()
	time.Sleep(down)
	n, err := natsd.Start(natsd.Config{Dir: s.dir, Port: s.port, Name: "test"})
	if err != nil {
		return fmt.Errorf("restart nats-server: %w", err)
	}
	s.mu.Lock()
	s.srv = n
	s.mu.Unlock()
	return nil
}

// Shutdown stops the server and waits for it.
func (s *Server) Shutdown() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	natsd.Shutdown(srv)
}

// StartCluster starts an in-process three-node cluster with its stores
// under dir; its nodes can be stopped and started again.
func StartCluster(dir string) (*natsd.Nodes, error) {
	c, err := natsd.StartNodes(dir, 3)
	if err != nil {
		return nil, fmt.Errorf("start cluster: %w", err)
	}
	return c, nil
}

// Connect opens a connection to url (a comma-separated list for a cluster)
// that reconnects forever, so it survives a server restart, and its
// JetStream context.
func Connect(url string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	opts = append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(50 * time.Millisecond)}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return nc, js, nil
}
