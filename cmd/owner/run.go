package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/baton-rt/baton/internal/app"
	"github.com/baton-rt/baton/internal/lockfile"
	"github.com/baton-rt/baton/internal/natsd"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime/demo"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/subjects"
	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config is the owner process configuration.
type Config struct {
	app.Common
	Names      subjects.Names
	DataDir    string
	NATSListen string
	NATSOnly   bool // run the embedded NATS server only
	SyncAlways bool
	LockFile   string // held while running (make run: one per deployment)
	Replicas   int    // of every stream and bucket (topology.Config.Replicas)
	ProcessID  string
	ExecLog    string
	// Durability (docs/runtime.md, "Durability").
	LeaseTTL      time.Duration
	SweepInterval time.Duration
	TaskAckWait   time.Duration
	StepTimeout   time.Duration
	// Hibernation (docs/driver.md, "Hibernation").
	HibernateAfter     time.Duration
	MaxLoaded          int
	InboxSweepInterval time.Duration
	MetricsListen      string
	DrainTimeout       time.Duration
	// Quarantine (docs/driver.md, "Quarantine").
	QuarantineAfter   int
	QuarantineBackoff backoffList
	Fault             string // test only: see faultUsage
}

// Run starts (or connects to) NATS, ensures the topology and serves until ctx
// ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.NATSOnly {
		return runNATS(ctx, cfg, log)
	}
	base := log
	log = log.With(app.KeyDeployment, cfg.DeploymentID)
	if cfg.LockFile != "" {
		l, err := lockfile.Acquire(cfg.LockFile, holder(fmt.Sprintf("owner of deployment %s (process %s)", cfg.DeploymentID, cfg.ProcessID)))
		if err != nil {
			return lockError(err, "another owner of this deployment runs from here")
		}
		defer l.Release()
	}
	url := cfg.NATSURL
	if url == "" {
		s, stop, err := embed(cfg, log)
		if err != nil {
			return err
		}
		defer stop()
		url = s.ClientURL()
	}
	nc, err := app.Connect(url, "baton-owner-"+cfg.DeploymentID, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	top, err := ensureTopology(ctx, js, topology.Config{Names: cfg.Names, Replicas: cfg.Replicas}, log)
	if err != nil {
		return err
	}
	for _, c := range top.Changes {
		log.Info("topology", "change", c)
	}
	store, err := kv.Open(ctx, js, cfg.Names)
	if err != nil {
		return err
	}
	agent := &demo.Agent{Process: cfg.ProcessID}
	if cfg.ExecLog != "" {
		l, err := demo.OpenFileLog(cfg.ExecLog)
		if err != nil {
			return err
		}
		defer l.Close()
		agent.Log = l
	}
	faults, err := parseFaults(cfg.Fault, log)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	owner, err := pool.New(pool.Config{
		NC: nc, JS: js, Store: store, Names: cfg.Names, Deployment: cfg.DeploymentID,
		ProcessID: cfg.ProcessID, Agent: agent, Log: base,
		LeaseTTL: cfg.LeaseTTL, SweepInterval: cfg.SweepInterval, TaskAckWait: cfg.TaskAckWait, StepTimeout: cfg.StepTimeout,
		HibernateAfter: cfg.HibernateAfter, MaxLoaded: cfg.MaxLoaded, InboxSweepInterval: cfg.InboxSweepInterval,
		DrainTimeout: cfg.DrainTimeout, Registerer: reg, Faults: faults,
		QuarantineAfter: cfg.QuarantineAfter, QuarantineBackoff: cfg.QuarantineBackoff.steps(),
	})
	if err != nil {
		return err
	}
	if cfg.MetricsListen != "" {
		stop, err := serveMetrics(cfg.MetricsListen, reg, nc, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	log.Info("owner ready", "nats", url, app.KeyProcess, cfg.ProcessID, "lease_ttl", cfg.LeaseTTL.String())
	err = owner.Run(ctx)
	log.Info("owner shutting down")
	return err
}

// runNATS is --nats-only: the embedded server until ctx ends.
func runNATS(ctx context.Context, cfg Config, log *slog.Logger) error {
	s, stop, err := embed(cfg, log)
	if err != nil {
		return err
	}
	defer stop()
	log.Info("NATS server ready", "url", s.ClientURL(), "store", cfg.DataDir, "pid", os.Getpid())
	<-ctx.Done()
	log.Info("NATS server shutting down")
	return nil
}

// embed starts the embedded server on cfg.DataDir, holding the store's lock
// (<data-dir>/nats.lock) first: a store another server has open is refused
// at once, before anything reads it. stop shuts the server down and lets
// the lock go.
func embed(cfg Config, log *slog.Logger) (*server.Server, func(), error) {
	host, portStr, _ := net.SplitHostPort(cfg.NATSListen) // checked by parseFlags
	port, _ := strconv.Atoi(portStr)
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, nil, err
	}
	l, err := lockfile.Acquire(filepath.Join(cfg.DataDir, "nats.lock"),
		holder(fmt.Sprintf("NATS server on %s", cfg.NATSListen)))
	if err != nil {
		return nil, nil, lockError(err, "the store "+cfg.DataDir+" is in use; stop that server or give another --data-dir")
	}
	s, err := natsd.Start(natsd.Config{
		Dir: cfg.DataDir, Host: host, Port: port, Name: "baton-embedded",
		SyncAlways: cfg.SyncAlways, Logger: log, // natsd adds component=nats
	})
	if err != nil {
		l.Release()
		return nil, nil, err
	}
	log.Info("embedded NATS server started", "url", s.ClientURL(), "store", cfg.DataDir, "sync_always", cfg.SyncAlways)
	return s, func() { natsd.Shutdown(s); l.Release() }, nil
}

// holder is the line a lock names its holder by.
func holder(what string) string {
	return fmt.Sprintf("pid %d: %s, since %s", os.Getpid(), what, time.Now().Format(time.DateTime))
}

func lockError(err error, hint string) error {
	var held *lockfile.HeldError
	if errors.As(err, &held) {
		return fmt.Errorf("%w (%s)", err, hint)
	}
	return err
}

// serveMetrics serves /metrics (Prometheus), /healthz (the process runs) and
// /readyz (connected to NATS) on addr until stop is called.
func serveMetrics(addr string, reg *prometheus.Registry, nc *nats.Conn, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !nc.IsConnected() {
			http.Error(w, "not connected to NATS", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ready\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	log.Info("owner metrics", "listen", ln.Addr().String())
	return func() { _ = srv.Close() }, nil
}

// topologyWait bounds how long an owner retries creating the topology on a
// cluster that is still forming ("no suitable peers for placement", no meta
// leader yet).
const topologyWait = time.Minute

// ensureTopology is topology.Ensure, retried with backoff while the error
// can pass (a cluster still forming); an incompatible existing resource is
// final.
func ensureTopology(ctx context.Context, js jetstream.JetStream, cfg topology.Config, log *slog.Logger) (*topology.Topology, error) {
	var top *topology.Topology
	op := func() error {
		var err error
		top, err = topology.Ensure(ctx, js, cfg)
		var incompatible *topology.IncompatibleError
		if errors.As(err, &incompatible) {
			return backoff.Permanent(err)
		}
		if err != nil {
			log.Warn("topology not ready; retrying", "err", err)
		}
		return err
	}
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(250*time.Millisecond), backoff.WithMaxInterval(5*time.Second),
		backoff.WithMaxElapsedTime(topologyWait)), ctx)
	return top, backoff.Retry(op, b)
}
