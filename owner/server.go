package owner

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

	"github.com/baton-rt/baton/internal/lockfile"
	"github.com/baton-rt/baton/internal/natsd"
	"github.com/baton-rt/baton/internal/topology"
	"github.com/baton-rt/baton/kv"
	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// embed starts the embedded server on cfg.DataDir, holding the store's lock
// (<data-dir>/nats.lock) first: a store another server has open is refused
// at once, before anything reads it. stop shuts the server down and lets
// the lock go.
func embed(cfg Config, log *slog.Logger) (*server.Server, func(), error) {
	host, portStr, _ := net.SplitHostPort(cfg.NATSListen) // checked by resolve
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
// final. It logs every change it made.
func ensureTopology(ctx context.Context, js jetstream.JetStream, r resolved, log *slog.Logger) error {
	top, err := topology.Await(ctx, js, topology.Config{Names: r.names, Replicas: r.Replicas}, topologyWait,
		func(err error) { log.Warn("topology not ready; retrying", "err", err) })
	if err != nil {
		return err
	}
	for _, c := range top.Changes {
		log.Info("topology", "change", c)
	}
	return nil
}

// openStore is kv.Open, retried as the topology is (topology.Retry, for
// at most topologyWait) while no leader answers in time (kv.Leaderless, or
// a request's own deadline): the topology has just been ensured, so an answer that does
// not come is a cluster electing or too busy to answer, which passes, and
// an owner started then waits for it instead of exiting. Any other error
// (a bucket without the shape leases need) is final at once.
func openStore(ctx context.Context, js jetstream.JetStream, r resolved, log *slog.Logger) (*kv.Store, error) {
	var store *kv.Store
	op := func() error {
		var err error
		if store, err = kv.Open(ctx, js, r.names); err == nil {
			return nil
		}
		if !kv.Leaderless(err) && !errors.Is(err, context.DeadlineExceeded) {
			return backoff.Permanent(err)
		}
		log.Warn("session store not ready; retrying", "err", err)
		return err
	}
	if err := topology.Retry(ctx, topologyWait, op); err != nil {
		return nil, err
	}
	return store, nil
}
