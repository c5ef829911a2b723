package main

import (
	"context"
	"errors"
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
	MaxBodyBytes   int64
	Tokens         []string // read from AuthTokenFile
	AdminTokens    []string // read from AdminTokenFile
}

// Run connects to NATS, serves the HTTP API and the baton-ingress micro
// service until ctx ends, then stops admission and drains.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
	if cfg.InsecureDev && len(cfg.Tokens) == 0 {
		log.Warn("--insecure-dev: the HTTP API accepts requests without a bearer token; never use this in production")
	}
	log = log.With(app.KeyDeployment, cfg.DeploymentID)
	nc, err := app.Connect(cfg.NATSURL, "baton-ingress-"+cfg.DeploymentID, log)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ing, err := ingress.New(ingress.Config{
		NC: nc, JS: js, Names: cfg.Names, Deployment: cfg.DeploymentID,
		Tokens: cfg.Tokens, AdminTokens: cfg.AdminTokens, InsecureDev: cfg.InsecureDev,
		Limits: ingress.Limits{MaxBodyBytes: bodyLimit(cfg.MaxBodyBytes, nc.MaxPayload())}, Registerer: reg, Log: log,
	})
	if err != nil {
		return err
	}
	defer ing.Close()
	svc, err := ing.Micro(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = svc.Stop() }()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler(ing, reg), ReadHeaderTimeout: 10 * time.Second}
	log.Info("ingress ready", "listen", ln.Addr().String(), "nats", nc.ConnectedUrlRedacted(), "service", ingress.ServiceName,
		"admin_routes", len(cfg.AdminTokens) > 0)
	return serve(ctx, srv, ln, ing, log)
}

func serve(ctx context.Context, srv *http.Server, ln net.Listener, ing *ingress.Server, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Info("ingress shutting down")
	ing.Close() // ends the SSE streams, which Shutdown would wait for
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
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
