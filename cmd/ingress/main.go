// Command ingress is the HTTP and NATS front door for channel services: it
// stamps every accepted command with its own --deployment-id and publishes it
// to the session's inbox.
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/app"
)

func main() {
	app.Main(app.Binary[Config]{
		Name: "ingress", Parse: parseFlags, Run: Run,
		Logger: func(cfg Config, w io.Writer) *slog.Logger { return cfg.Logger(w) },
	})
}

const about = `Serves the Baton ingress: the HTTP API (--listen) and the NATS micro service
baton-ingress. It stamps every command it accepts with its --deployment-id and
publishes it to the session's inbox. SIGTERM, SIGINT or SIGHUP drains it: no
new requests, open event streams end, requests in flight finish (within
--drain-timeout; exit 1 if some did not); a second signal aborts.`

func parseFlags(args []string) (Config, error) {
	var cfg Config
	fs := flag.NewFlagSet("ingress", flag.ContinueOnError)
	cfg.Register(fs, "nats://127.0.0.1:4222")
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "HTTP listen address")
	fs.StringVar(&cfg.AuthTokenFile, "auth-token-file", "", "file with the bearer tokens accepted on /v1/ (one per line)")
	fs.StringVar(&cfg.AdminTokenFile, "admin-token-file", "", "file with the bearer tokens accepted on /v1/admin/ (one per line); without it the admin routes answer 403 admin_disabled")
	fs.BoolVar(&cfg.InsecureDev, "insecure-dev", false, "accept requests without bearer tokens (development only)")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM/SIGINT/SIGHUP: stop taking requests (HTTP and NATS), end the event streams and let the requests in flight finish, for at most this long; requests still running then are logged and cut off, and the exit code is 1 (a second signal aborts)")
	fs.DurationVar(&cfg.FinishWait, "finish-wait", ingress.DefaultFinishWait, "how long the admin end or retry of a quarantined session waits for an owner to carry it out; then it answers 202 {\"pending\":true} and an owner finishes it when one runs")
	fs.StringVar(&cfg.EndedAlias, "ended-alias", ingress.EndedAliasGone, "a delivery to the alias of an ended session: gone (410 gone) or new (a new session takes the alias over; the answer names the ended one as previousSessionId)")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", ingress.DefaultMaxBodyBytes, "largest request body; larger is 413 too_large (capped below the server's max_payload)")
	if err := app.ParseFlags(fs, args, about); err != nil {
		return cfg, err
	}
	names, err := cfg.Validate()
	if err != nil {
		return cfg, err
	}
	cfg.Names = names
	if err := app.CheckAddr("--listen", cfg.Listen); err != nil {
		return cfg, err
	}
	if cfg.DrainTimeout <= 0 {
		return cfg, fmt.Errorf("%w: --drain-timeout %s: want a positive duration", app.ErrUsage, cfg.DrainTimeout)
	}
	if cfg.FinishWait <= 0 {
		return cfg, fmt.Errorf("%w: --finish-wait %s: want a positive duration", app.ErrUsage, cfg.FinishWait)
	}
	if cfg.EndedAlias != ingress.EndedAliasGone && cfg.EndedAlias != ingress.EndedAliasNew {
		return cfg, fmt.Errorf("%w: --ended-alias %q: want %s or %s", app.ErrUsage, cfg.EndedAlias, ingress.EndedAliasGone, ingress.EndedAliasNew)
	}
	if cfg.MaxBodyBytes <= 0 {
		return cfg, fmt.Errorf("%w: --max-body-bytes %d: want a positive size", app.ErrUsage, cfg.MaxBodyBytes)
	}
	if strings.TrimSpace(cfg.NATSURL) == "" {
		return cfg, fmt.Errorf("%w: --nats-url is empty", app.ErrUsage)
	}
	if cfg.AuthTokenFile == "" && !cfg.InsecureDev {
		return cfg, fmt.Errorf("%w: --auth-token-file is required (or --insecure-dev for local development)", app.ErrUsage)
	}
	if cfg.AuthTokenFile != "" {
		if cfg.Tokens, err = ingress.LoadTokens(cfg.AuthTokenFile); err != nil {
			return cfg, fmt.Errorf("%w: --auth-token-file: %w", app.ErrUsage, err)
		}
	}
	if cfg.AdminTokenFile != "" {
		if cfg.AdminTokens, err = ingress.LoadTokens(cfg.AdminTokenFile); err != nil {
			return cfg, fmt.Errorf("%w: --admin-token-file: %w", app.ErrUsage, err)
		}
	}
	return cfg, nil
}
