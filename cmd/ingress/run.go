package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/baton-rt/baton/internal/app"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
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
}

// Run connects to NATS and serves HTTP until ctx ends.
func Run(ctx context.Context, cfg Config, log *slog.Logger) error {
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
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: routes(cfg, nc, js), ReadHeaderTimeout: 10 * time.Second}
	log.Info("ingress ready", "listen", ln.Addr().String(), "nats", nc.ConnectedUrlRedacted())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	log.Info("ingress shutting down")
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func routes(cfg Config, nc *nats.Conn, js jetstream.JetStream) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(r.Context(), cfg.Names, nc, js); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

// ready reports whether NATS is connected and the topology exists.
func ready(ctx context.Context, names subjects.Names, nc *nats.Conn, js jetstream.JetStream) error {
	if !nc.IsConnected() {
		return errors.New("nats not connected")
	}
	for _, s := range []string{names.InboxStream(), names.EventsStream()} {
		if _, err := js.Stream(ctx, s); err != nil {
			return errors.New("stream " + s + ": " + err.Error())
		}
	}
	return nil
}
