package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/app"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config is the ingress configuration.
type Config struct {
	app.Common
	Names          subjects.Names
	Listen         string
	AuthTokenFile  string
	AdminTokenFile string
	InsecureDev    bool
	UI             bool // --ui: the session inspector at /ui/
	MaxBodyBytes   int64
	DrainTimeout   time.Duration
	FinishWait     time.Duration
	EndedAlias     string
	Tokens         []string // read from AuthTokenFile
	AdminTokens    []string // read from AdminTokenFile
	Browser        Browser  // --cors-origin, --stream-token-key-file, --stream-token-ttl (main.go)
}

// Run connects to NATS, serves the HTTP API and the baton-ingress micro
// service until ctx ends, then drains (see drain): it returns nil when
// every request finished within cfg.DrainTimeout, an error otherwise.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.InsecureDev && len(cfg.Tokens) == 0 {
		log.Warn("--insecure-dev: the HTTP API accepts requests without a bearer token; never use this in production")
	}
	log = log.With(app.KeyDeployment, cfg.DeploymentID)
	conn := app.NewConnMetrics()
	nc, err := app.Connect(cfg.NATSURL, "baton-ingress-"+cfg.DeploymentID, log, conn)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		conn.Collector())
	ing, err := ingress.New(ingress.Config{
		NC: nc, JS: js, Names: cfg.Names, Deployment: cfg.DeploymentID, Agent: cfg.AgentName,
		Tokens: cfg.Tokens, AdminTokens: cfg.AdminTokens, InsecureDev: cfg.InsecureDev, FinishWait: cfg.FinishWait,
		EndedAlias: cfg.EndedAlias, CORSOrigins: cfg.Browser.CORSOrigins,
		StreamTokenKeys: cfg.Browser.StreamTokenKeys, StreamTokenTTL: cfg.Browser.StreamTokenTTL, UI: cfg.UI,
		Limits: ingress.Limits{MaxBodyBytes: bodyLimit(cfg.MaxBodyBytes, nc.MaxPayload())}, Registerer: reg, Log: log,
	})
	if err != nil {
		return err
	}
	defer ing.Close()
	// The NATS handlers' context outlives ctx: a drain lets them finish.
	handlers, stopHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopHandlers()
	svc, err := ing.Micro(handlers)
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler(ing, reg), ReadHeaderTimeout: 10 * time.Second}
	log.Info("ingress ready", "listen", ln.Addr().String(), "nats", nc.ConnectedUrlRedacted(), "agent", cfg.AgentName,
		"service", ingress.AgentServiceName(cfg.AgentName), "admin_routes", len(cfg.AdminTokens) > 0, "ui", cfg.UI)
	errc := make(chan error, 2)
	go func() { errc <- srv.Serve(ln) }()
	// Attach as soon as the topology exists: a deployment of another agent
	// ends the process (exit 1) instead of serving 503s.
	go func() {
		if err := ing.Enroll(ctx); err != nil && ctx.Err() == nil {
			errc <- err
		}
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return drain(context.WithoutCancel(ctx), cfg.DrainTimeout, srv, svc, ing, log)
}

// drain stops admission on HTTP and NATS, ends the event streams and waits
// up to timeout for the requests in flight to finish. Requests still
// running then are logged one by one, cut off, and make drain fail.
func drain(ctx context.Context, timeout time.Duration, srv *http.Server, svc ingress.Services, ing *ingress.Server, log *slog.Logger) error {
	log.Info("ingress draining: no new requests; waiting for the ones in flight", "timeout", timeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := svc.Stop(); err != nil {
		log.Warn("stopping the NATS service", app.KeyErr, err)
	}
	ing.Close() // ends the SSE streams, which Shutdown would wait for
	err := srv.Shutdown(ctx)
	left := ing.Drain(ctx)
	if err == nil && len(left) == 0 {
		log.Info("ingress drained")
		return nil
	}
	_ = srv.Close()
	for _, p := range left {
		log.Error("drain left a request", "via", p.Via, "op", p.Op, "path", p.Path, "session", p.SessionID,
			"running", time.Since(p.Since).Round(time.Millisecond), "why", "still running at the drain timeout")
	}
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("ingress: drain: %w", err)
	}
	return fmt.Errorf("ingress: drain did not finish within %s: %d requests left", timeout, max(len(left), 1))
}

// handler is the API plus /metrics from the process registry.
func handler(ing *ingress.Server, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", ing.Handler())
	return mux
}

// bodyLimit keeps the request body limit below the server's max_payload
// minus room for the command envelope and headers.
func bodyLimit(flag int64, maxPayload int64) int64 {
	limit := flag
	if limit <= 0 {
		limit = ingress.DefaultMaxBodyBytes
	}
	if room := maxPayload - 128<<10; maxPayload > 0 && limit > room {
		limit = room
	}
	return limit
}
