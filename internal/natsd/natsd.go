package natsd

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ErrNotReady is returned when the server does not become ready in time.
var ErrNotReady = errors.New("natsd: server not ready")

// Config describes one embedded server.
type Config struct {
	Dir          string        // JetStream store directory (required)
	Host         string        // listen host; default 127.0.0.1
	Port         int           // client port; -1 picks a free one
	Name         string        // server name; required and unique in a cluster
	SyncAlways   bool          // fsync every write
	ReadyTimeout time.Duration // default 30s (JetStream recovery counts)
	Cluster      *Cluster      // nil for a single server
	Logger       *slog.Logger  // nil: the server logs nothing
	// MaxConsumers is the server's default per-stream consumer limit for
	// streams that set none (2.15 defaults to 1,000). 0 keeps the default.
	MaxConsumers int
}

// Cluster joins the server to a route cluster.
type Cluster struct {
	Name   string
	Port   int
	Routes []string // nats://host:port of every node (listing itself is fine)
}

// Start starts the server and waits until it accepts connections.
func Start(cfg Config) (*server.Server, error) {
	s, err := Launch(cfg)
	if err != nil {
		return nil, err
	}
	return s, WaitReady(s, cfg)
}

// Launch starts the server without waiting for it.
func Launch(cfg Config) (*server.Server, error) {
	opts, err := options(cfg)
	if err != nil {
		return nil, err
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsd: %w", err)
	}
	if cfg.Logger != nil {
		s.SetLoggerV2(slogAdapter{cfg.Logger}, false, false, false)
	}
	go s.Start()
	return s, nil
}

// WaitReady waits until s accepts connections (after JetStream recovery) and
// shuts it down if it does not in cfg.ReadyTimeout.
func WaitReady(s *server.Server, cfg Config) error {
	timeout := cfg.ReadyTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	if !s.ReadyForConnections(timeout) {
		s.Shutdown()
		return fmt.Errorf("%w after %s (store %s)", ErrNotReady, timeout, cfg.Dir)
	}
	return nil
}

func options(cfg Config) (*server.Options, error) {
	if cfg.Dir == "" {
		return nil, errors.New("natsd: store directory required")
	}
	host := cfg.Host
	if host == "" {
		host = "127.0.0.1"
	}
	opts := &server.Options{
		ServerName: cfg.Name,
		Host:       host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.Dir,
		SyncAlways: cfg.SyncAlways,
		NoLog:      cfg.Logger == nil,
		NoSigs:     true,
	}
	opts.JetStreamLimits.DefaultMaxConsumers = cfg.MaxConsumers
	if c := cfg.Cluster; c != nil {
		opts.Cluster = server.ClusterOpts{Name: c.Name, Host: host, Port: c.Port}
		for _, r := range c.Routes {
			opts.Routes = append(opts.Routes, server.RoutesFromStr(r)...)
		}
	}
	return opts, nil
}

// slogAdapter routes the server's log lines to slog.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Noticef(f string, v ...any) {
	a.l.Debug(fmt.Sprintf(f, v...), "component", "nats")
}
func (a slogAdapter) Warnf(f string, v ...any)  { a.l.Warn(fmt.Sprintf(f, v...), "component", "nats") }
func (a slogAdapter) Fatalf(f string, v ...any) { a.l.Error(fmt.Sprintf(f, v...), "component", "nats") }
func (a slogAdapter) Errorf(f string, v ...any) { a.l.Error(fmt.Sprintf(f, v...), "component", "nats") }
func (a slogAdapter) Debugf(f string, v ...any) { a.l.Debug(fmt.Sprintf(f, v...), "component", "nats") }
func (a slogAdapter) Tracef(f string, v ...any) { a.l.Debug(fmt.Sprintf(f, v...), "component", "nats") }
