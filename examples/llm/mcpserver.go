package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Timeouts of an MCP server's connection: at start (connect and list the
// tools) and for each reconnect.
const (
	mcpStartTimeout = 30 * time.Second
	mcpDialTimeout  = 30 * time.Second
)

// Restart waits: the first, doubled (with jitter) after each failure up to
// the last, and back to the first once a connection lasted that long.
const (
	DefaultMCPRestartFirst = 250 * time.Millisecond
	DefaultMCPRestartMax   = 30 * time.Second
)

// codeRejected is the code of the SDK's errors for a request that never
// reached the server (its internal jsonrpc2.ErrRejected: an HTTP request
// that failed or was answered with an error status).
const codeRejected = -32005

// restartPolicy is the supervisor's wait before it reconnects a server
// that failed (zero: the defaults).
type restartPolicy struct{ first, max time.Duration }

func (p restartPolicy) backoff() *backoff.ExponentialBackOff {
	if p.first <= 0 {
		p.first = DefaultMCPRestartFirst
	}
	if p.max <= 0 {
		p.max = DefaultMCPRestartMax
	}
	return backoff.NewExponentialBackOff(backoff.WithInitialInterval(p.first), backoff.WithMaxInterval(p.max),
		backoff.WithMultiplier(2), backoff.WithRandomizationFactor(0.2), backoff.WithMaxElapsedTime(0))
}

// mcpServer is one MCP server's connection and its supervisor: a
// goroutine that, when the session ends (a server process exited, a call
// found the connection broken), closes it and connects again — a command
// runs again — after a backoff, for as long as the agent lives. While it
// is down, calls fail at once with ErrMCPUnavailable.
type mcpServer struct {
	src    mcpSource
	client *mcp.Client
	policy restartPolicy
	log    *slog.Logger

	mu     sync.Mutex
	cs     *mcp.ClientSession // nil while down
	reason string             // why it is down
	broken chan struct{}      // a call found cs broken (sent under mu, while cs is current)

	stop context.CancelFunc
	done chan struct{} // closed when the supervisor has returned
}

// startServer connects src, lists its tools, and starts its supervisor.
func startServer(src mcpSource, p restartPolicy, log *slog.Logger) (*mcpServer, []*mcp.Tool, error) {
	s := &mcpServer{src: src, policy: p, log: log.With("mcp_server", src.name), broken: make(chan struct{}, 1), done: make(chan struct{})}
	s.client = mcp.NewClient(&mcp.Implementation{Name: "baton-llm", Version: "v1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), mcpStartTimeout)
	defer cancel()
	cs, err := s.client.Connect(ctx, src.dial(), nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: cannot connect: %w", src.name, err)
	}
	var tools []*mcp.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			_ = cs.Close()
			return nil, nil, fmt.Errorf("%s: tools/list: %w", src.name, err)
		}
		tools = append(tools, t)
	}
	s.cs = cs
	var sctx context.Context
	sctx, s.stop = context.WithCancel(context.Background())
	go s.supervise(sctx, cs)
	return s, tools, nil
}

// call is one tools/call. A server that answered — with a result or a
// JSON-RPC error — leaves the connection as it is; a call that found no
// connection, did not reach the server or broke on the connection is an
// ErrMCPUnavailable error, and has the supervisor reconnect.
func (s *mcpServer) call(ctx context.Context, p *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	s.mu.Lock()
	cs, reason := s.cs, s.reason
	s.mu.Unlock()
	if cs == nil {
		return nil, fmt.Errorf("%w: %s is down (%s); the owner restarts it", ErrMCPUnavailable, s.src.name, reason)
	}
	r, err := cs.CallTool(ctx, p)
	var rpc *jsonrpc.Error
	switch {
	case err == nil:
		return r, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.As(err, &rpc) && rpc.Code != codeRejected:
		return nil, fmt.Errorf("%s: tools/call %s: %w", s.src.name, p.Name, err)
	}
	s.broke(cs, err)
	return nil, fmt.Errorf("%w: %s: tools/call %s: %v; the owner reconnects", ErrMCPUnavailable, s.src.name, p.Name, err)
}

// broke marks cs, when it is still the current session, down for err and
// wakes the supervisor.
func (s *mcpServer) broke(cs *mcp.ClientSession, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cs != cs {
		return
	}
	s.cs, s.reason = nil, err.Error()
	select {
	case s.broken <- struct{}{}:
	default:
	}
}

// up reports whether the server is connected.
func (s *mcpServer) up() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cs != nil
}

// close stops the supervisor, which closes the session (a command's stdin
// closed; the SDK signals a process that does not exit within 5s).
func (s *mcpServer) close() {
	s.stop()
	<-s.done
}

// supervise watches cs and each session after it until ctx ends.
func (s *mcpServer) supervise(ctx context.Context, cs *mcp.ClientSession) {
	defer close(s.done)
	b := s.policy.backoff()
	for cs != nil {
		since := time.Now()
		reason := s.watch(ctx, cs)
		if ctx.Err() != nil {
			return
		}
		if time.Since(since) >= b.MaxInterval {
			b.Reset()
		}
		s.log.Warn("mcp: server down; reconnecting", "reason", reason)
		cs = s.reconnect(ctx, b, reason)
	}
}

// watch waits until cs ends, a call found it broken or ctx ends, marks the
// server down and closes cs; it returns why.
func (s *mcpServer) watch(ctx context.Context, cs *mcp.ClientSession) string {
	ended := make(chan error, 1)
	go func() { ended <- cs.Wait() }()
	var waitErr error
	waited := false
	select {
	case waitErr = <-ended:
		waited = true
	case <-s.broken:
	case <-ctx.Done():
	}
	s.mu.Lock()
	reason := s.reason
	s.cs = nil
	select {
	case <-s.broken: // cs's, sent before it was marked down here
	default:
	}
	s.mu.Unlock()
	closeErr := cs.Close() // a command's exit status
	if !waited {
		waitErr = <-ended
	}
	switch {
	case reason != "":
	case closeErr != nil:
		reason = closeErr.Error()
	case waitErr != nil:
		reason = waitErr.Error()
	default:
		reason = "the connection closed"
	}
	s.setReason(reason)
	return reason
}

// reconnect connects anew after each wait of b until it succeeds (the new
// session) or ctx ends (nil); reason is why the last session ended.
func (s *mcpServer) reconnect(ctx context.Context, b backoff.BackOff, reason string) *mcp.ClientSession {
	for attempt := 1; ; attempt++ {
		t := time.NewTimer(b.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		dctx, cancel := context.WithTimeout(ctx, mcpDialTimeout)
		cs, err := s.client.Connect(dctx, s.src.dial(), nil)
		cancel()
		if err == nil {
			s.mu.Lock()
			s.cs, s.reason = cs, ""
			s.mu.Unlock()
			s.log.Info("mcp: server reconnected", "attempt", attempt)
			return cs
		}
		if ctx.Err() != nil {
			return nil
		}
		s.setReason(fmt.Sprintf("%s; reconnect %d failed: %v", reason, attempt, err))
		s.log.Warn("mcp: reconnect failed", "attempt", attempt, "err", err)
	}
}

func (s *mcpServer) setReason(r string) {
	s.mu.Lock()
	s.reason = r
	s.mu.Unlock()
}
