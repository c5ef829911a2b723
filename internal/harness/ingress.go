package harness

import (
	"context"
	"net/http"
	"net/http/httptest"

	"github.com/baton-rt/baton/ingress"
)

// Ingress is an in-process ingress.Server on a real HTTP listener
// (httptest) with its micro service, as cmd/ingress runs it.
type Ingress struct {
	*ingress.Server
	HTTP   *httptest.Server
	svc    ingress.Services
	cancel context.CancelFunc
}

// StartIngress builds the ingress of cfg (cfg.NC and cfg.JS: a connection
// of its own), serves its handler and starts its micro service.
func StartIngress(cfg ingress.Config) (*Ingress, error) { return StartIngressWith(cfg, nil) }

// StartIngressWith is StartIngress with the handler wrapped by wrap (nil:
// as it is): a test's view of every request and answer.
func StartIngressWith(cfg ingress.Config, wrap func(http.Handler) http.Handler) (*Ingress, error) {
	srv, err := ingress.New(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := srv.Micro(ctx)
	if err == nil {
		// The server has the service's subscriptions when StartIngress
		// returns: a request from another connection finds a responder.
		err = cfg.NC.Flush()
	}
	if err != nil {
		_ = svc.Stop()
		cancel()
		srv.Close()
		return nil, err
	}
	h := srv.Handler()
	if wrap != nil {
		h = wrap(h)
	}
	return &Ingress{Server: srv, HTTP: httptest.NewServer(h), svc: svc, cancel: cancel}, nil
}

// URL is the listener's base URL.
func (i *Ingress) URL() string { return i.HTTP.URL }

// Close stops the ingress, its listener (cutting open streams) and its
// micro service.
func (i *Ingress) Close() {
	i.Server.Close()
	i.HTTP.CloseClientConnections()
	i.HTTP.Close()
	_ = i.svc.Stop()
	i.cancel()
}
