package owner

import (
	"flag"
	"fmt"
	"log/slog"

	"github.com/baton-rt/baton/internal/app"
)

// flags is what Main parses: the Config, the log and version flags, and the
// test aids its options add.
type flags struct {
	cfg     Config
	common  app.Common
	fault   string
	execLog string
	agent   agentFlags
}

// extras are the test aids of a run of f.
func (f flags) extras(o options) extras {
	return extras{fault: f.fault, execLog: f.execLog, attach: o.attach}
}

// parseFlags parses args into a checked configuration: every value is
// checked before anything runs, a bad one is an app.ErrUsage error naming
// its flag.
func parseFlags(args []string, o options) (flags, error) {
	f := flags{cfg: DefaultConfig()}
	fs := flag.NewFlagSet(o.name, flag.ContinueOnError)
	f.register(fs, o)
	if err := o.registerOwn(fs); err != nil {
		return f, err
	}
	if err := app.ParseFlags(fs, args, o.about); err != nil {
		return f, err
	}
	f.cfg.DeploymentID, f.cfg.NATSURL, f.cfg.Prefix = f.common.DeploymentID, f.common.NATSURL, f.common.Prefix
	f.cfg.AgentName = f.common.AgentName
	if f.cfg.NATSOnly {
		return f, f.checkNATSOnly(fs)
	}
	r, err := f.cfg.resolve()
	if err != nil {
		return f, fmt.Errorf("%w: %w", app.ErrUsage, err)
	}
	f.cfg = r.Config // the process ID defaulted
	f.cfg.Tasks = o.tasks
	if err := f.common.ValidateLog(); err != nil {
		return f, err
	}
	if _, err := parseFaults(f.fault, slog.New(slog.DiscardHandler)); err != nil {
		return f, err
	}
	if err := f.agent.check(); err != nil {
		return f, fmt.Errorf("%w: %w", app.ErrUsage, err)
	}
	return f, o.checkOwn()
}

// checkNATSOnly refuses the flags that have no meaning for a NATS server
// alone.
func (f flags) checkNATSOnly(fs *flag.FlagSet) error {
	var extra []string
	fs.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "nats-only", "data-dir", "nats-listen", "sync-always", "log-level", "log-format":
		default:
			extra = append(extra, "--"+fl.Name)
		}
	})
	if len(extra) > 0 {
		return fmt.Errorf("%w: --nats-only runs a NATS server only; %v do not apply", app.ErrUsage, extra)
	}
	if err := f.common.ValidateLog(); err != nil {
		return err
	}
	if _, err := f.cfg.resolve(); err != nil {
		return fmt.Errorf("%w: %w", app.ErrUsage, err)
	}
	return nil
}

// register adds every flag to fs, each defaulting to f's value.
func (f *flags) register(fs *flag.FlagSet, o options) {
	c := &f.cfg
	f.common.Register(fs, "")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "JetStream store of the embedded NATS server (locked while it runs: a second server on it is refused)")
	fs.StringVar(&c.NATSListen, "nats-listen", c.NATSListen, "listen address of the embedded NATS server (port -1: a free one)")
	fs.BoolVar(&c.NATSOnly, "nats-only", c.NATSOnly, "run only the embedded NATS server (--data-dir, --nats-listen, --sync-always) until SIGTERM, SIGINT or SIGHUP: no deployment, no sessions")
	fs.BoolVar(&c.SyncAlways, "sync-always", c.SyncAlways, "embedded server fsyncs every write (sync_interval: always)")
	fs.IntVar(&c.Replicas, "replicas", c.Replicas, "replicas of every stream and bucket the owner creates or updates (1-5; 3 on a three-node cluster; needs --nats-url when > 1). Every owner of every deployment must pass the same value: the topology is reconciled to it at start")
	fs.StringVar(&c.ProcessID, "process-id", c.ProcessID, "this owner process's ID, stable across restarts: its session index (default <hostname>-<deployment-id>)")
	fs.StringVar(&c.LockFile, "lock-file", c.LockFile, "hold an exclusive lock on this file while running; if another process holds it, exit at once naming it (make run locks <data>/owner-<deployment>.lock)")
	fs.StringVar(&c.MetricsListen, "metrics-listen", c.MetricsListen, "serve Prometheus /metrics, /healthz and /readyz on this address (empty: off)")
	f.registerDurability(fs)
	f.registerLimits(fs)
	f.agent.register(fs)
	if o.fault {
		fs.StringVar(&f.fault, "fault", "", faultUsage)
	}
	if o.attach != nil {
		fs.StringVar(&f.execLog, "exec-log", "", "append the agent's execution log (one JSON line per step) to this file")
	}
}

// registerDurability adds the flags of leases, steps, hibernation, drain
// and quarantine.
func (f *flags) registerDurability(fs *flag.FlagSet) {
	c := &f.cfg
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", c.LeaseTTL, "owner lease TTL, whole seconds ≥ 1s; renewed every TTL/4, the process fences itself after TTL − TTL/4 without a renewal, a dead process's sessions move to a peer about TTL after its last renewal")
	fs.DurationVar(&c.SweepInterval, "sweep-interval", c.SweepInterval, "how often the pool's sweeper looks for active sessions whose owner process has no live lease (≥ 0)")
	fs.DurationVar(&c.StepTimeout, "step-timeout", c.StepTimeout, "an agent step running longer fails with code step_timeout (its context is cancelled; more than 0)")
	fs.DurationVar(&c.TaskAckWait, "task-ack-wait", c.TaskAckWait, "a background task whose runner stopped signalling progress for this long runs again on another owner process (≥ 1s)")
	fs.DurationVar(&c.HibernateAfter, "hibernate-after", c.HibernateAfter, "a quiet session (no step running; it may await input) hibernates after this long without activity: its consumer is deleted and it leaves memory until a command wakes it (negative: never)")
	fs.DurationVar(&c.RetainEnded, "retain-ended", c.RetainEnded, "delete an ended session this long after it ended — its events, blobs, journal, receipts and index entry; its ID stays taken (410 deleted) — found in the session index by the sweep (0: keep forever; every owner of a fleet should use the same value)")
	fs.DurationVar(&c.EndIdleAfter, "end-idle-after", c.EndIdleAfter, "end a session that had no command for this long, with reason idle_expired — hibernated ones too, found in the session index by the sweep; a session waiting for input, authorization, a task or a child, or paused, never expires this way (0: never; every owner of a fleet should use the same value)")
	fs.IntVar(&c.MaxLoaded, "max-loaded", c.MaxLoaded, "most sessions (and inbox consumers) this process runs at once; at the cap, a new load makes the least recently active quiet sessions hibernate early (0: no cap)")
	fs.DurationVar(&c.IndexReconcileInterval, "index-reconcile-every", c.IndexReconcileInterval, "how often the session index's reconciler reads its next batch of records (0: off; a rebuild still runs)")
	fs.DurationVar(&c.InboxSweepInterval, "inbox-sweep-interval", c.InboxSweepInterval, "how often the pool looks for hibernated sessions with unprocessed commands (a lost wake, a fired timer); more than 0, at most 5s")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", c.DrainTimeout, "on SIGTERM/SIGINT/SIGHUP: stop taking work, let running steps finish and commit, hibernate every session and release the lease, for at most this long (0: stop at once; a second signal aborts)")
	fs.DurationVar(&c.ChildSendTimeout, "child-send-timeout", c.ChildSendTimeout, "how long a send that creates a child on a deployment with no running owner is retried, from the delegation, before the delegation fails with child_unavailable (more than 0)")
	fs.IntVar(&c.QuarantineAfter, "quarantine-after", c.QuarantineAfter, "counted boot attempts (an unreadable checkpoint, or a process that died with the session's step in flight) after which a session is quarantined instead of booted (at least 1)")
	fs.Var((*backoffList)(&c.QuarantineBackoff), "quarantine-backoff", "wait before a session's next boot attempt after 1, 2, … counted attempts, comma-separated Go durations, the last repeating (e.g. 1s,5s,30s)")
}

// registerLimits adds the turn and session limits.
func (f *flags) registerLimits(fs *flag.FlagSet) {
	c := &f.cfg
	fs.IntVar(&c.MaxStepsPerTurn, "max-steps-per-turn", c.MaxStepsPerTurn, "most agent steps one turn may take (0: the default)")
	fs.Int64Var(&c.MaxTokensPerTurn, "max-tokens-per-turn", c.MaxTokensPerTurn, "most tokens one turn may use (0: no limit)")
	fs.Int64Var(&c.MaxTokensPerSession, "max-tokens-per-session", c.MaxTokensPerSession, "most tokens a session may use over its life (0: no limit)")
	fs.DurationVar(&c.MaxDebounce, "max-debounce", c.MaxDebounce, "the longest a debounce window stays open, from its first delivery: debounced deliveries that keep arriving start their one turn then")
	fs.IntVar(&c.StepRetries, "step-retries", c.StepRetries, "how many times a step runs again after failing for a reason outside the agent's control: agent_timeout, agent_unavailable (--agent nats), agent_retryable (runtime.Retryable); each retry is recorded as turn.step_retried (0: never)")
	fs.Var((*backoffList)(&c.StepRetryBackoff), "step-retry-backoff", "wait before a step's first, second, … retry, comma-separated Go durations, the last repeating; the session's other commands are received meanwhile, and a cancel cancels the turn")
}
