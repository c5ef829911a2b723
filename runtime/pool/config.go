package pool

import (
	"fmt"
	"github.com/baton-rt/baton/internal/failpoint"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Durability defaults (docs/runtime.md, "Durability").
const (
	// DefaultLeaseTTL is the TTL of an owner process's lease: a dead
	// process's sessions are taken over about this long after its last
	// renewal.
	DefaultLeaseTTL = 2 * time.Second
	// DefaultSweepInterval paces the orphan sweeper.
	DefaultSweepInterval = 10 * time.Second
	// DefaultHibernateAfter is how long a quiet session stays loaded.
	DefaultHibernateAfter = 5 * time.Minute
	// DefaultIndexReconcileInterval paces the session index's reconciler.
	DefaultIndexReconcileInterval = 30 * time.Second
	// DefaultIndexReconcileBatch is how many keys of each stream (the
	// session records', the index's) one reconcile run reads.
	DefaultIndexReconcileBatch = 2000
	// DefaultInboxSweepInterval paces the inbox sweeper: the bound on how
	// long a command to a hibernated session can wait when its wake was
	// lost, and on how late a timer reaches a hibernated session.
	DefaultInboxSweepInterval = 2 * time.Second
	// DefaultTaskAckWait is how long a background task may go without a
	// progress signal before another owner process runs it again.
	DefaultTaskAckWait = 30 * time.Second
	// DefaultStepTimeout bounds one agent step: its context is cancelled
	// then, and a step that has not returned is recorded as step_timeout.
	DefaultStepTimeout = 10 * time.Minute
)

// DefaultMaxStepsPerTurn is the most steps one turn may take when
// Config.MaxStepsPerTurn is 0.
const DefaultMaxStepsPerTurn = 50

// The step retry policy bin/owner starts from (--step-retries,
// --step-retry-backoff); a zero Config.StepRetry retries nothing.
const DefaultStepRetries = 2

// DefaultStepRetryBackoff is the wait before the first and the later
// retries of a step.
var DefaultStepRetryBackoff = []time.Duration{time.Second, 5 * time.Second}

// Config wires an Owner to its NATS connection, store and agent.
type Config struct {
	NC         *nats.Conn
	JS         jetstream.JetStream
	Store      *kv.Store
	Names      subjects.Names
	Deployment string // exact deployment of this process
	// AgentName is the agent the deployment is a version of
	// (docs/runtime.md R10; [a-z0-9][a-z0-9_-]{0,63}; "" is
	// subjects.DefaultAgent). A deployment never changes agents.
	AgentName string
	ProcessID string // this owner process, stable across restarts: its lease key and session index
	Agent     runtime.Agent
	Events    *wire.EventRegistry // built-ins plus the agent's kinds; nil = built-ins + Agent.EventKinds
	Log       *slog.Logger
	// TickInterval paces clock ticks and purges (default 1 s).
	TickInterval time.Duration
	// TriggerWait bounds how long a handoff's successor waits for its
	// trigger to admit it in its boot commit (session.Env.TriggerWait;
	// 0: session.DefaultTriggerWait; negative: never, the boot commits
	// alone and the trigger follows).
	TriggerWait time.Duration
	// LeaseTTL is the lease TTL: whole seconds, at least 1 s (default 2 s).
	// The process renews every LeaseRenew and fences itself (stops every
	// session) when LeaseTTL − LeaseTTL/4 has passed since its last
	// successful renewal, a quarter of the TTL before the lease can expire.
	LeaseTTL time.Duration
	// LeaseRenew is the renewal period (default LeaseTTL/4); it must be
	// shorter than LeaseTTL − LeaseTTL/4.
	LeaseRenew time.Duration
	// SweepInterval paces the orphan sweeper (default 10 s).
	SweepInterval time.Duration
	// IndexReconcileInterval paces the session index's reconciler
	// (default 30 s; negative: off), IndexReconcileBatch bounds the keys
	// of each stream one run reads (default 2000).
	IndexReconcileInterval time.Duration
	IndexReconcileBatch    int
	// NoIndexReconciler turns the reconciler off entirely, rebuilds
	// included (tests that count a process's calls).
	NoIndexReconciler bool
	// TaskAckWait is the ack wait of the deployment's task consumer
	// (default 30 s): a task whose runner died runs again after it.
	TaskAckWait time.Duration
	// Tasks are the background task handlers by kind; "sleep" is
	// SleepTask unless Tasks names another handler for it. A task
	// of a kind without a handler fails (code unknown_task_kind).
	Tasks map[string]runtime.TaskHandler
	// StepTimeout bounds one agent step (default 10 min): its context is
	// cancelled at the timeout, and the step fails with code step_timeout
	// whether or not the agent returns (a result that comes later is
	// discarded).
	StepTimeout time.Duration
	// DisableHandoff turns the handoff transaction off: the owner keeps a
	// session whose delivery names another deployment and processes it
	// (default: hand off over Names.Start(target), docs/handoff.md).
	DisableHandoff bool
	// HandoffStartTimeout bounds a handoff's start request (default
	// handoff.DefaultStartTimeout).
	HandoffStartTimeout time.Duration
	// ChildSendTimeout bounds a send that creates a child on a deployment
	// with no live owner, from the delegation (docs/driver.md, "Child
	// sends"): retried outside the session loop until then, after which
	// the delegation fails with child_unavailable (default 60 s; negative:
	// refused by New).
	ChildSendTimeout time.Duration
	// HibernateAfter is how long a quiet session (no step running; it may
	// await input, an authorization, a task or a resume) stays loaded
	// before it hibernates (default 5 min; negative: never, except under
	// MaxLoaded).
	HibernateAfter time.Duration
	// EndIdleAfter ends a session that had no command for this long, with
	// reason idle_expired (0: never): a loaded session at its next tick,
	// a hibernated one found by the sweep in the session index and loaded
	// to end it. A session waiting for input, authorization, a task or a
	// child, or paused, never expires this way. Every owner of a fleet
	// should use the same value: each applies its own.
	EndIdleAfter time.Duration
	// RetainEnded deletes an ended session this long after it ended
	// (docs/operations.md, "Sizing"): found in the session index by the
	// sweep, a page per sweep (≤ 0: kept forever).
	RetainEnded time.Duration
	// MaxLoaded caps the sessions running in this process, and so its inbox
	// consumers (0: no cap). At the cap, a load asks the least recently
	// active quiet sessions to hibernate early and waits briefly for room;
	// it fails with ErrAtCapacity when none is made.
	MaxLoaded int
	// InboxSweepInterval paces the inbox sweeper, which wakes hibernated
	// sessions of this deployment holding unprocessed commands (default
	// 2 s; at most 5 s by design; negative: off, for tests).
	InboxSweepInterval time.Duration
	// Registerer receives the owner's Prometheus metrics (nil: not
	// registered; Owner.Stats still counts).
	Registerer prometheus.Registerer
	// DrainTimeout turns the end of Run's context into a graceful drain
	// (docs/driver.md, "Graceful drain"): no new work, running steps
	// finish and commit, every session hibernates, the lease is released;
	// whatever is not done after DrainTimeout is abandoned as on a crash.
	// 0: no drain, sessions stop at once (their uncommitted work re-runs
	// elsewhere).
	DrainTimeout time.Duration
	// QuarantineAfter is how many counted boot attempts quarantine a
	// session (docs/driver.md, "Quarantine"): an attempt that failed
	// before its claim (ErrUnbootable), or a claim of a record whose
	// previous owner vanished with a step in flight or mid-boot. The
	// attempt that reaches it parks the session instead of running it
	// (default 3, at least 1).
	QuarantineAfter int
	// QuarantineBackoff is the wait before the next attempt after one,
	// two, … counted attempts, the last entry repeating, each stretched by
	// up to a half by a per-session jitter (nil: 1s, 5s, 30s; empty: no
	// wait).
	QuarantineBackoff []time.Duration
	// MaxStepsPerTurn caps the steps of one turn (0: the default,
	// DefaultMaxStepsPerTurn; negative: refused by New).
	MaxStepsPerTurn int
	// MaxTokensPerTurn caps the tokens one turn may use, and
	// MaxTokensPerSession those of a session over its life (0: no limit;
	// negative: refused by New).
	MaxTokensPerTurn    int64
	MaxTokensPerSession int64
	// StepRetry is how a step that failed for a reason outside the agent's
	// control (agent_timeout, agent_unavailable, agent_retryable) runs
	// again (runtime.RetryPolicy; zero: never; a negative count or wait is
	// refused by New).
	StepRetry runtime.RetryPolicy
	// MaxDebounce bounds a debounce window from its first delivery (0:
	// runtime.DefaultMaxDebounce).
	MaxDebounce time.Duration
	// Failpoints are the armed fault injection points (internal/failpoint;
	// tests and bin/owner --fault only); nil in production.
	Failpoints *failpoint.Registry
	// Now is the machine's clock (default time.Now). Leases always use the
	// real monotonic clock.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.TickInterval == 0 {
		c.TickInterval = time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Names == (subjects.Names{}) {
		c.Names = subjects.Default()
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.LeaseRenew == 0 {
		c.LeaseRenew = c.LeaseTTL / 4
	}
	if c.IndexReconcileInterval == 0 {
		c.IndexReconcileInterval = DefaultIndexReconcileInterval
	}
	if c.IndexReconcileBatch <= 0 {
		c.IndexReconcileBatch = DefaultIndexReconcileBatch
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.HibernateAfter == 0 {
		c.HibernateAfter = DefaultHibernateAfter
	}
	if c.InboxSweepInterval == 0 {
		c.InboxSweepInterval = DefaultInboxSweepInterval
	}
	if c.TaskAckWait == 0 {
		c.TaskAckWait = DefaultTaskAckWait
	}
	if c.ChildSendTimeout == 0 {
		c.ChildSendTimeout = DefaultChildSendTimeout
	}
	c.StepRetry.Backoff = slices.Clone(c.StepRetry.Backoff)
	c.Tasks = maps.Clone(c.Tasks)
	if c.Tasks == nil {
		c.Tasks = map[string]runtime.TaskHandler{}
	}
	if c.Tasks[wire.TaskSleep] == nil {
		c.Tasks[wire.TaskSleep] = SleepTask
	}
	if c.StepTimeout == 0 {
		c.StepTimeout = DefaultStepTimeout
	}
	if c.QuarantineAfter == 0 {
		c.QuarantineAfter = DefaultQuarantineAfter
	}
	if c.QuarantineBackoff == nil {
		c.QuarantineBackoff = DefaultQuarantineBackoff
	}
	if c.MaxStepsPerTurn == 0 {
		c.MaxStepsPerTurn = DefaultMaxStepsPerTurn
	}
	return c
}

func (c Config) validateDurability() error {
	switch {
	case c.LeaseTTL < kv.MinLeaseTTL || c.LeaseTTL%time.Second != 0:
		return fmt.Errorf("pool: lease TTL %v: must be a whole number of seconds, at least %v", c.LeaseTTL, kv.MinLeaseTTL)
	case c.LeaseRenew <= 0 || c.LeaseRenew >= c.fenceAfter():
		return fmt.Errorf("pool: lease renewal period %v: must be positive and shorter than %v (TTL − TTL/4)", c.LeaseRenew, c.fenceAfter())
	case c.InboxSweepInterval > 5*time.Second:
		return fmt.Errorf("pool: inbox sweep interval %v: at most 5s (the bound on a lost wake)", c.InboxSweepInterval)
	case c.MaxLoaded < 0:
		return fmt.Errorf("pool: max loaded sessions %d: must not be negative", c.MaxLoaded)
	case c.StepTimeout < 0:
		return fmt.Errorf("pool: step timeout %v: must not be negative", c.StepTimeout)
	case c.ChildSendTimeout < 0:
		return fmt.Errorf("pool: child send timeout %v: must not be negative", c.ChildSendTimeout)
	case c.SweepInterval < 0 || c.TaskAckWait < time.Second:
		return fmt.Errorf("pool: sweep interval %v / task ack wait %v out of range", c.SweepInterval, c.TaskAckWait)
	case c.QuarantineAfter < 1:
		return fmt.Errorf("pool: quarantine after %d attempts: must be at least 1", c.QuarantineAfter)
	case slices.ContainsFunc(c.QuarantineBackoff, func(d time.Duration) bool { return d < 0 }):
		return fmt.Errorf("pool: quarantine backoff %v: no step may be negative", c.QuarantineBackoff)
	}
	return c.validateLimits()
}

// validateLimits refuses a negative turn or session limit, or step retry
// policy.
func (c Config) validateLimits() error {
	switch {
	case c.MaxStepsPerTurn < 0:
		return fmt.Errorf("pool: max steps per turn %d: must not be negative", c.MaxStepsPerTurn)
	case c.MaxTokensPerTurn < 0:
		return fmt.Errorf("pool: max tokens per turn %d: must not be negative", c.MaxTokensPerTurn)
	case c.MaxTokensPerSession < 0:
		return fmt.Errorf("pool: max tokens per session %d: must not be negative", c.MaxTokensPerSession)
	case c.StepRetry.Retries < 0:
		return fmt.Errorf("pool: step retries %d: must not be negative", c.StepRetry.Retries)
	case slices.ContainsFunc(c.StepRetry.Backoff, func(d time.Duration) bool { return d < 0 }):
		return fmt.Errorf("pool: step retry backoff %v: no wait may be negative", c.StepRetry.Backoff)
	}
	return nil
}

// fenceAfter is how long after a renewal was sent the lease counts as held:
// a quarter of the TTL before the server can expire it.
func (c Config) fenceAfter() time.Duration { return c.LeaseTTL - c.LeaseTTL/4 }

// leaseCall bounds one lease call of acquire (and one claim attempt of a
// resume): long enough for a loaded server, short enough that a call the
// bucket's leader left unanswered (it died, an election follows) is sent
// again soon after the new leader is elected: the renewal period, at least
// 250 ms.
func (c Config) leaseCall() time.Duration { return max(c.LeaseRenew, 250*time.Millisecond) }

// leasePoll paces the attempts to acquire the lease, and the renewals of a
// paused process.
func (c Config) leasePoll() time.Duration {
	return min(max(c.LeaseTTL/10, 50*time.Millisecond), 250*time.Millisecond)
}
