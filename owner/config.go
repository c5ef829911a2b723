package owner

import (
	"log/slog"
	"slices"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/subjects"
)

// Config is an owner process's configuration: every setting of Main's
// flags but the log flags (Logger stands for them) and the test aids
// (Option). Each field names the flag it comes from. Start from
// DefaultConfig: a zero Config is not the default (a zero DrainTimeout stops
// at once, a zero MaxLoaded sets no cap) and has no DeploymentID.
type Config struct {
	// DeploymentID is the exact deployment this process runs
	// (--deployment-id; required): [A-Za-z0-9_-]{1,64}, never "latest".
	DeploymentID string
	// AgentName is the agent the deployment is a version of
	// (--agent-name; default subjects.DefaultAgent, "default"):
	// [a-z0-9][a-z0-9_-]{0,63}. A deployment never changes agents; a
	// session never moves to another agent's deployment (docs/runtime.md
	// R10). Not --agent, which chooses where steps run.
	AgentName string
	// NATSURL is the NATS server URL(s), comma-separated (--nats-url).
	// Empty: Run embeds a server with JetStream on NATSListen, its store in
	// DataDir.
	NATSURL string
	// Prefix is the name prefix of every stream, bucket and subject
	// (--prefix; default subjects.DefaultPrefix, "baton").
	Prefix string
	// DataDir is the embedded server's JetStream store (--data-dir;
	// default ./data). Run locks it (<DataDir>/nats.lock) while the server
	// runs: a second server on it is refused.
	DataDir string
	// NATSListen is the embedded server's host:port (--nats-listen; default
	// 127.0.0.1:4222; port -1 picks a free one).
	NATSListen string
	// NATSOnly runs the embedded server and nothing else until the context
	// ends (--nats-only): no deployment, no sessions, no agent.
	NATSOnly bool
	// SyncAlways makes the embedded server fsync every write
	// (--sync-always).
	SyncAlways bool
	// Replicas of every stream and bucket the owner creates or updates
	// (--replicas; 1 to 5, default 1; more than 1 needs NATSURL). Every
	// owner of every deployment must use the same value: the topology is
	// reconciled to it at start.
	Replicas int
	// ProcessID names this owner process, stable across its restarts: its
	// lease key and session index (--process-id; default
	// <hostname>-<deployment>).
	ProcessID string
	// LockFile, when set, is locked while Run runs; a second process with
	// the same file exits at once naming the first (--lock-file).
	LockFile string

	// LeaseTTL is the owner lease's TTL, whole seconds ≥ 1s (--lease-ttl;
	// default pool.DefaultLeaseTTL): a dead process's sessions move to a
	// peer about this long after its last renewal.
	LeaseTTL time.Duration
	// SweepInterval paces the sweeper that looks for sessions whose owner
	// process has no live lease (--sweep-interval; ≥ 0).
	SweepInterval time.Duration
	// TaskAckWait is how long a background task may go without a progress
	// signal before it runs again elsewhere (--task-ack-wait; ≥ 1s).
	TaskAckWait time.Duration
	// StepTimeout bounds one agent step (--step-timeout; more than 0): its
	// context is cancelled and the step fails with code step_timeout.
	StepTimeout time.Duration
	// ChildSendTimeout bounds a send that creates a child on a deployment
	// with no live owner, from the delegation (--child-send-timeout; more
	// than 0): then the delegation fails with child_unavailable.
	ChildSendTimeout time.Duration

	// HibernateAfter is how long a quiet session stays loaded before it
	// hibernates (--hibernate-after; negative: never).
	HibernateAfter time.Duration
	// EndIdleAfter ends a session that had no command for this long, with
	// reason idle_expired (--end-idle-after; default 0: never). A session
	// waiting for input, authorization, a task or a child, or paused,
	// never expires this way.
	EndIdleAfter time.Duration
	// RetainEnded deletes ended sessions this long after they ended (0:
	// keep them forever; every owner of a fleet should use the same
	// value).
	RetainEnded time.Duration
	// MaxDebounce bounds a debounce window from its first delivery
	// (--max-debounce; default runtime.DefaultMaxDebounce).
	MaxDebounce time.Duration
	// MaxLoaded caps the sessions this process runs at once (--max-loaded;
	// default 2000; 0: no cap).
	MaxLoaded int
	// IndexReconcileInterval paces the session index's reconciler
	// (--index-reconcile-every; default 30s; 0: off — rebuilds still run;
	// docs/nats-layout.md, "The session index").
	IndexReconcileInterval time.Duration
	// InboxSweepInterval paces the look for hibernated sessions with
	// unprocessed commands (--inbox-sweep-interval; more than 0, at most 5s).
	InboxSweepInterval time.Duration
	// DrainTimeout bounds the graceful drain when the context ends
	// (--drain-timeout; default 30s; 0: stop at once).
	DrainTimeout time.Duration
	// MetricsListen serves Prometheus /metrics, /healthz and /readyz on
	// this address (--metrics-listen; empty: off).
	MetricsListen string

	// QuarantineAfter is how many counted boot attempts quarantine a
	// session (--quarantine-after; at least 1).
	QuarantineAfter int
	// QuarantineBackoff is the wait before the next boot attempt after 1,
	// 2, … counted attempts, the last repeating (--quarantine-backoff; no
	// negative wait; nil: pool.DefaultQuarantineBackoff; empty: no wait).
	QuarantineBackoff []time.Duration

	// MaxStepsPerTurn caps the steps of one turn (--max-steps-per-turn;
	// default 50; 0 is the default too; not negative).
	MaxStepsPerTurn int
	// MaxTokensPerTurn caps the tokens of one turn, MaxTokensPerSession
	// those of a session's life (--max-tokens-per-turn,
	// --max-tokens-per-session; 0: no limit; not negative).
	MaxTokensPerTurn    int64
	MaxTokensPerSession int64

	// StepRetries is how many times a step that failed for a reason
	// outside the agent's control runs again: its remote worker died or
	// went silent (agent_timeout), none answered (agent_unavailable), or
	// an in-process agent's error was marked with runtime.Retryable
	// (agent_retryable) (--step-retries; default 2; 0: never; not
	// negative). Each retry is recorded as turn.step_retried.
	StepRetries int
	// StepRetryBackoff is the wait before the first, second, … retry, the
	// last entry repeating (--step-retry-backoff; default 1s,5s; no
	// negative wait; empty: none).
	StepRetryBackoff []time.Duration

	// Tasks are the background task handlers by kind (see
	// runtime.TaskHandler); "sleep" is built in unless Tasks replaces it.
	// WithTask adds to them.
	Tasks map[string]runtime.TaskHandler

	// Logger receives the process's log (nil: nothing is logged). Main
	// builds it from --log-level and --log-format.
	Logger *slog.Logger
	// Ready, when set, is called once the deployment serves: its start
	// requests are answered (by this process or a peer of the deployment),
	// so an ingress can start sessions. It gets the URL of the NATS server
	// the owner uses (the embedded one's when NATSURL is empty) and runs on
	// a goroutine of its own, which Run waits for before it returns: Ready
	// should not block.
	Ready func(natsURL string)
}

// DefaultConfig is the configuration Main's flags default to; only
// DeploymentID has to be set.
func DefaultConfig() Config {
	return Config{
		Prefix:                 subjects.DefaultPrefix,
		AgentName:              subjects.DefaultAgent,
		DataDir:                "./data",
		NATSListen:             "127.0.0.1:4222",
		Replicas:               1,
		LeaseTTL:               pool.DefaultLeaseTTL,
		SweepInterval:          pool.DefaultSweepInterval,
		TaskAckWait:            pool.DefaultTaskAckWait,
		StepTimeout:            pool.DefaultStepTimeout,
		ChildSendTimeout:       pool.DefaultChildSendTimeout,
		HibernateAfter:         pool.DefaultHibernateAfter,
		MaxLoaded:              2000,
		InboxSweepInterval:     pool.DefaultInboxSweepInterval,
		IndexReconcileInterval: pool.DefaultIndexReconcileInterval,
		DrainTimeout:           30 * time.Second,
		QuarantineAfter:        pool.DefaultQuarantineAfter,
		QuarantineBackoff:      slices.Clone(pool.DefaultQuarantineBackoff),
		MaxStepsPerTurn:        pool.DefaultMaxStepsPerTurn,
		StepRetries:            pool.DefaultStepRetries,
		MaxDebounce:            runtime.DefaultMaxDebounce,
		StepRetryBackoff:       slices.Clone(pool.DefaultStepRetryBackoff),
	}
}
