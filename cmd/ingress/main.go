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
	fs.BoolVar(&cfg.UI, "ui", false, "serve the session inspector, a browser app, at /ui/ (docs/ui.md): its files need no token; the app asks its user for the tokens it sends (stream tokens need --stream-token-key-file)")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM/SIGINT/SIGHUP: stop taking requests (HTTP and NATS), end the event streams and let the requests in flight finish, for at most this long; requests still running then are logged and cut off, and the exit code is 1 (a second signal aborts)")
	fs.DurationVar(&cfg.FinishWait, "finish-wait", ingress.DefaultFinishWait, "how long the admin end or retry of a quarantined session waits for an owner to carry it out; then it answers 202 {\"pending\":true} and an owner finishes it when one runs")
	fs.StringVar(&cfg.EndedAlias, "ended-alias", ingress.EndedAliasGone, "a delivery to the alias of an ended session: gone (410 gone) or new (a new session takes the alias over; the answer names the ended one as previousSessionId)")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", ingress.DefaultMaxBodyBytes, "largest request body; larger is 413 too_large (capped below the server's max_payload)")
	cfg.Browser.register(fs)
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
	return cfg, cfg.Browser.load()
}

// Browser is what lets browsers use the HTTP API (docs/api.md, "Browsers:
// CORS and stream tokens").
type Browser struct {
	CORSOrigins        []string // --cors-origin, each checked when parsed
	StreamTokenKeyFile string
	StreamTokenTTL     time.Duration
	StreamTokenKeys    [][]byte // read from StreamTokenKeyFile
}

func (b *Browser) register(fs *flag.FlagSet) {
	fs.Var((*originsFlag)(&b.CORSOrigins), "cors-origin", "a browser `origin` allowed to call the HTTP API (CORS), exactly as browsers send it: scheme://host[:port], e.g. https://app.example.com; repeat the flag for several; none: no CORS")
	fs.StringVar(&b.StreamTokenKeyFile, "stream-token-key-file", "", "file with the keys of the stream tokens (?token= on GET /v1/sessions/{id}/events, for EventSource): one or two keys, one per line, each at least 32 bytes; the first signs, both verify (rotation by restart); without it POST /v1/sessions/{id}/stream-token answers 404 stream_tokens_disabled")
	fs.DurationVar(&b.StreamTokenTTL, "stream-token-ttl", ingress.DefaultStreamTokenTTL, "lifetime of a stream token (at most 1h)")
}

// load checks the stream token TTL and reads the key file.
func (b *Browser) load() error {
	if b.StreamTokenTTL <= 0 || b.StreamTokenTTL > ingress.MaxStreamTokenTTL {
		return fmt.Errorf("%w: --stream-token-ttl %s: want a positive duration of at most %s", app.ErrUsage, b.StreamTokenTTL, ingress.MaxStreamTokenTTL)
	}
	if b.StreamTokenKeyFile == "" {
		return nil
	}
	keys, err := ingress.LoadStreamTokenKeys(b.StreamTokenKeyFile)
	if err != nil {
		return fmt.Errorf("%w: --stream-token-key-file: %w", app.ErrUsage, err)
	}
	b.StreamTokenKeys = keys
	return nil
}

// originsFlag is the repeatable --cors-origin.
type originsFlag []string

func (o *originsFlag) String() string { return strings.Join(*o, " ") }

// Set checks and adds one origin.
func (o *originsFlag) Set(v string) error {
	if err := ingress.CheckCORSOrigin(v); err != nil {
		return err
	}
	*o = append(*o, v)
	return nil
}
