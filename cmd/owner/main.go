// Command owner runs an owner pool process pinned to one exact deployment.
// With an empty --nats-url it embeds a NATS server with JetStream
// (127.0.0.1:4222, store ./data) so the nats CLI and cmd/ingress can connect;
// with --nats-only it runs that server and nothing else (make run starts
// NATS this way, in a process of its own).
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/baton-rt/baton/internal/app"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/subjects"
)

func main() {
	app.Main(app.Binary[Config]{
		Name: "owner", Parse: parseFlags, Run: Run,
		Logger: func(cfg Config, w io.Writer) *slog.Logger { return cfg.Logger(w) },
	})
}

const about = `Runs an owner pool process of one exact deployment: it holds a lease, serves
start and wake requests on baton.deploy.<deployment>.*, runs sessions with the
demo agent and drains on SIGTERM or SIGINT (a second signal aborts). With an
empty --nats-url it embeds a NATS server (JetStream, store --data-dir); with
--nats-only it runs only that server, for owners and ingresses of any
deployment to connect to.`

func parseFlags(args []string) (Config, error) {
	var cfg Config
	fs := flag.NewFlagSet("owner", flag.ContinueOnError)
	cfg.Register(fs, "")
	fs.StringVar(&cfg.DataDir, "data-dir", "./data", "JetStream store of the embedded NATS server (locked while it runs: a second server on it is refused)")
	fs.StringVar(&cfg.NATSListen, "nats-listen", "127.0.0.1:4222", "listen address of the embedded NATS server (port -1: a free one)")
	fs.BoolVar(&cfg.NATSOnly, "nats-only", false, "run only the embedded NATS server (--data-dir, --nats-listen, --sync-always) until SIGTERM or SIGINT: no deployment, no sessions")
	fs.BoolVar(&cfg.SyncAlways, "sync-always", false, "embedded server fsyncs every write (sync_interval: always)")
	fs.IntVar(&cfg.Replicas, "replicas", 1, "replicas of every stream and bucket the owner creates or updates (1-5; 3 on a three-node cluster; needs --nats-url when > 1). Every owner of every deployment must pass the same value: the topology is reconciled to it at start")
	fs.StringVar(&cfg.ProcessID, "process-id", "", "this owner process's ID, stable across restarts: its session index (default <hostname>-<deployment-id>)")
	fs.StringVar(&cfg.LockFile, "lock-file", "", "hold an exclusive lock on this file while running; if another process holds it, exit at once naming it (make run locks <data>/owner-<deployment>.lock)")
	fs.StringVar(&cfg.ExecLog, "exec-log", "", "append the demo agent's execution log (one JSON line per step) to this file")
	fs.DurationVar(&cfg.LeaseTTL, "lease-ttl", pool.DefaultLeaseTTL, "owner lease TTL, whole seconds ≥ 1s; renewed every TTL/4, the process fences itself after TTL − TTL/4 without a renewal, a dead process's sessions move to a peer about TTL after its last renewal")
	fs.DurationVar(&cfg.SweepInterval, "sweep-interval", pool.DefaultSweepInterval, "how often the pool's sweeper looks for active sessions whose owner process has no live lease (≥ 0)")
	fs.DurationVar(&cfg.StepTimeout, "step-timeout", pool.DefaultStepTimeout, "an agent step running longer fails with code step_timeout (its context is cancelled; more than 0)")
	fs.DurationVar(&cfg.TaskAckWait, "task-ack-wait", pool.DefaultTaskAckWait, "a background task whose runner stopped signalling progress for this long runs again on another owner process (≥ 1s)")
	fs.DurationVar(&cfg.HibernateAfter, "hibernate-after", pool.DefaultHibernateAfter, "a quiet session (no step running; it may await input) hibernates after this long without activity: its consumer is deleted and it leaves memory until a command wakes it (negative: never)")
	fs.IntVar(&cfg.MaxLoaded, "max-loaded", 2000, "most sessions (and inbox consumers) this process runs at once; at the cap, a new load makes the least recently active quiet sessions hibernate early (0: no cap)")
	fs.DurationVar(&cfg.InboxSweepInterval, "inbox-sweep-interval", pool.DefaultInboxSweepInterval, "how often the pool looks for hibernated sessions with unprocessed commands (a lost wake, a fired timer); more than 0, at most 5s")
	fs.DurationVar(&cfg.DrainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM/SIGINT: stop taking work, let running steps finish and commit, hibernate every session and release the lease, for at most this long (0: stop at once; a second signal aborts)")
	fs.StringVar(&cfg.MetricsListen, "metrics-listen", "", "serve Prometheus /metrics, /healthz and /readyz on this address (empty: off)")
	fs.IntVar(&cfg.QuarantineAfter, "quarantine-after", pool.DefaultQuarantineAfter, "counted boot attempts (an unreadable checkpoint, or a process that died with the session's step in flight) after which a session is quarantined instead of booted (at least 1)")
	cfg.QuarantineBackoff = defaultBackoff()
	fs.Var(&cfg.QuarantineBackoff, "quarantine-backoff", "wait before a session's next boot attempt after 1, 2, … counted attempts, comma-separated Go durations, the last repeating (e.g. 1s,5s,30s)")
	fs.StringVar(&cfg.Fault, "fault", "", faultUsage)
	if err := app.ParseFlags(fs, args, about); err != nil {
		return cfg, err
	}
	if cfg.NATSOnly {
		return cfg, checkNATSOnly(fs, cfg)
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
	if err := checkValues(cfg); err != nil {
		return cfg, err
	}
	if cfg.NATSURL == "" {
		if err := checkNATSListen(cfg.NATSListen); err != nil {
			return cfg, err
		}
	}
	if cfg.MetricsListen != "" {
		if err := app.CheckAddr("--metrics-listen", cfg.MetricsListen); err != nil {
			return cfg, err
		}
	}
	_, err = parseFaults(cfg.Fault, slog.New(slog.DiscardHandler))
	return cfg, err
}

// checkValues checks every value the driver would refuse, so a bad one is
// a usage error before anything starts.
func checkValues(cfg Config) error {
	switch {
	case cfg.LeaseTTL < time.Second || cfg.LeaseTTL%time.Second != 0:
		return fmt.Errorf("%w: --lease-ttl %v: want whole seconds, at least 1s", app.ErrUsage, cfg.LeaseTTL)
	case cfg.Replicas < 1 || cfg.Replicas > 5:
		return fmt.Errorf("%w: --replicas %d: want 1 to 5", app.ErrUsage, cfg.Replicas)
	case cfg.Replicas > 1 && cfg.NATSURL == "":
		return fmt.Errorf("%w: --replicas %d needs a cluster (--nats-url); the embedded server is one node", app.ErrUsage, cfg.Replicas)
	case cfg.StepTimeout <= 0:
		return fmt.Errorf("%w: --step-timeout %v: want more than 0", app.ErrUsage, cfg.StepTimeout)
	case cfg.TaskAckWait < time.Second:
		return fmt.Errorf("%w: --task-ack-wait %v: want at least 1s", app.ErrUsage, cfg.TaskAckWait)
	case cfg.SweepInterval < 0:
		return fmt.Errorf("%w: --sweep-interval %v: want 0 or more", app.ErrUsage, cfg.SweepInterval)
	case cfg.InboxSweepInterval <= 0 || cfg.InboxSweepInterval > 5*time.Second:
		return fmt.Errorf("%w: --inbox-sweep-interval %v: want more than 0 and at most 5s (the bound on a lost wake)", app.ErrUsage, cfg.InboxSweepInterval)
	case cfg.MaxLoaded < 0:
		return fmt.Errorf("%w: --max-loaded %d: want 0 (no cap) or more", app.ErrUsage, cfg.MaxLoaded)
	case cfg.DrainTimeout < 0:
		return fmt.Errorf("%w: --drain-timeout %v: want 0 or more", app.ErrUsage, cfg.DrainTimeout)
	case cfg.QuarantineAfter < 1:
		return fmt.Errorf("%w: --quarantine-after %d: want at least 1", app.ErrUsage, cfg.QuarantineAfter)
	}
	return nil
}

// checkNATSOnly refuses the flags that have no meaning for a NATS server
// alone.
func checkNATSOnly(fs *flag.FlagSet, cfg Config) error {
	var extra []string
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "nats-only", "data-dir", "nats-listen", "sync-always", "log-level", "log-format":
		default:
			extra = append(extra, "--"+f.Name)
		}
	})
	if len(extra) > 0 {
		return fmt.Errorf("%w: --nats-only runs a NATS server only; %v do not apply", app.ErrUsage, extra)
	}
	if err := cfg.ValidateLog(); err != nil {
		return err
	}
	return checkNATSListen(cfg.NATSListen)
}

// checkNATSListen checks host:port of the embedded server (port -1 picks a
// free one).
func checkNATSListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err == nil {
		var n int
		if n, err = strconv.Atoi(port); err == nil && (n < -1 || n > 65535) {
			err = fmt.Errorf("port %d out of range", n)
		}
	}
	if err == nil && host == "" {
		err = fmt.Errorf("give a host (127.0.0.1 to stay local)")
	}
	if err != nil {
		return fmt.Errorf("%w: --nats-listen %q: want host:port (%v)", app.ErrUsage, addr, err)
	}
	return nil
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
