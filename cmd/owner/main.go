// Command owner runs an owner pool process pinned to one exact deployment.
// With an empty --nats-url it embeds a NATS server with JetStream
// (127.0.0.1:4222, store ./data) so the nats CLI and cmd/ingress can connect.
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/baton-rt/baton/internal/app"
	"github.com/baton-rt/baton/runtime/driver"
	"github.com/baton-rt/baton/subjects"
)

func main() {
	app.Main(app.Binary[Config]{
		Name: "owner", Parse: parseFlags, Run: Run,
		Logger: func(cfg Config, w io.Writer) *slog.Logger { return cfg.Logger(w) },
	})
}

func parseFlags(args []string, stderr io.Writer) (Config, error) {
	var cfg Config
	fs := flag.NewFlagSet("owner", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg.Register(fs, "")
	fs.StringVar(&cfg.DataDir, "data-dir", "./data", "JetStream store of the embedded NATS server")
	fs.StringVar(&cfg.NATSListen, "nats-listen", "127.0.0.1:4222", "listen address of the embedded NATS server")
	fs.BoolVar(&cfg.SyncAlways, "sync-always", false, "embedded server fsyncs every write (sync_interval: always)")
	fs.IntVar(&cfg.Replicas, "replicas", 1, "replicas of every stream and bucket the owner creates or updates (1-5; 3 on a three-node cluster; needs --nats-url when > 1). Every owner of every deployment must pass the same value: the topology is reconciled to it at start")
	fs.StringVar(&cfg.ProcessID, "process-id", "", "this owner process's ID, stable across restarts: its session index (default <hostname>-<deployment-id>)")
	fs.StringVar(&cfg.ExecLog, "exec-log", "", "append the demo agent's execution log (one JSON line per step) to this file")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", driver.DefaultLeaseTTL, "owner lease TTL, whole seconds ≥ 1s; renewed every TTL/4, the process fences itself after TTL − TTL/4 without a renewal, a dead process's sessions move to a peer about TTL after its last renewal")
	fs.DurationVar(&cfg.SweepInterval, "sweep-interval", driver.DefaultSweepInterval, "how often the pool's sweeper looks for active sessions whose owner process has no live lease")
	fs.DurationVar(&cfg.StepTimeout, "step-timeout", driver.DefaultStepTimeout, "an agent step running longer fails with code step_timeout (its context is cancelled)")
	fs.DurationVar(&cfg.TaskAckWait, "task-ack-wait", driver.DefaultTaskAckWait, "a background task whose runner stopped signalling progress for this long runs again on another owner process (≥ 1s)")
	fs.DurationVar(&cfg.HibernateAfter, "hibernate-after", driver.DefaultHibernateAfter, "a quiet session (no step running; it may await input) hibernates after this long without activity: its consumer is deleted and it leaves memory until a command wakes it (negative: never)")
	fs.IntVar(&cfg.MaxLoaded, "max-loaded", 2000, "most sessions (and inbox consumers) this process runs at once; at the cap, a new load makes the least recently active quiet sessions hibernate early (0: no cap)")
	fs.DurationVar(&cfg.InboxSweepInterval, "inbox-sweep-interval", driver.DefaultInboxSweepInterval, "how often the pool looks for hibernated sessions with unprocessed commands (a lost wake, a fired timer); at most 5s")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM/SIGINT: stop taking work, let running steps finish and commit, hibernate every session and release the lease, for at most this long (0: stop at once; a second signal aborts)")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", "", "serve Prometheus /metrics, /healthz and /readyz on this address (empty: off)")
	fs.StringVar(&cfg.Fault, "fault", "", faultUsage)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("%w: unexpected arguments %q", app.ErrUsage, fs.Args())
	}
	names, err := cfg.Validate()
	if err != nil {
		return cfg, err
	}
	cfg.Names = names
	if cfg.ProcessID == "" {
		cfg.ProcessID = defaultProcessID(cfg.DeploymentID)
	}
	if err := subjects.ValidateSessionID(cfg.ProcessID); err != nil {
		return cfg, fmt.Errorf("%w: --process-id: %w", app.ErrUsage, err)
	}
	if cfg.LeaseTTL < time.Second || cfg.LeaseTTL%time.Second != 0 {
		return cfg, fmt.Errorf("%w: --lease-ttl %v: want whole seconds, at least 1s", app.ErrUsage, cfg.LeaseTTL)
	}
	if cfg.Replicas < 1 || cfg.Replicas > 5 {
		return cfg, fmt.Errorf("%w: --replicas %d: want 1 to 5", app.ErrUsage, cfg.Replicas)
	}
	if cfg.Replicas > 1 && cfg.NATSURL == "" {
		return cfg, fmt.Errorf("%w: --replicas %d needs a cluster (--nats-url); the embedded server is one node", app.ErrUsage, cfg.Replicas)
	}
	if cfg.StepTimeout <= 0 {
		return cfg, fmt.Errorf("%w: --step-timeout must be positive", app.ErrUsage)
	}
	if cfg.TaskAckWait < time.Second || cfg.SweepInterval < 0 {
		return cfg, fmt.Errorf("%w: --task-ack-wait must be ≥ 1s and --sweep-interval ≥ 0", app.ErrUsage)
	}
	if _, err := parseFaults(cfg.Fault, slog.New(slog.DiscardHandler)); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// defaultProcessID is <hostname>-<deployment>, with every character outside
// [A-Za-z0-9_-] replaced: stable across restarts of one process per host.
func defaultProcessID(deployment string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "owner"
	}
	b := []byte(host + "-" + deployment)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	return string(b)
}
