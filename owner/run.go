package owner

import (
	"context"
	"fmt"
	"github.com/baton-rt/baton/internal/execlog"
	"github.com/baton-rt/baton/internal/failpoint"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/baton-rt/baton/internal/app"
	"github.com/baton-rt/baton/internal/lockfile"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/pool"
	"github.com/baton-rt/baton/runtime/remote"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Run runs an owner process of cfg.DeploymentID with agent until ctx ends:
// it checks cfg (an error matching ErrInvalidConfig), starts the embedded
// NATS server when cfg.NATSURL is empty, creates or reconciles the topology
// (every stream and bucket; retried for a minute while a cluster forms),
// holds the process's lease, serves the deployment's start and wake
// requests and runs its sessions. When ctx ends it drains for at most
// cfg.DrainTimeout — no new work, running steps finish and commit, every
// session hibernates, the lease is released — and returns nil. With
// cfg.NATSOnly it runs the embedded server alone and agent may be nil.
func Run(ctx context.Context, cfg Config, agent runtime.Agent) error {
	return run(ctx, cfg, agent, extras{})
}

// extras are what Main's test options add to a run.
type extras struct {
	fault   string                            // --fault spec ("": none)
	execLog string                            // --exec-log path ("": none)
	attach  func(l ExecLog, processID string) // WithExecLog's hook
}

func run(ctx context.Context, cfg Config, agent runtime.Agent, x extras) error {
	r, err := cfg.resolve()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if r.NATSOnly {
		return runNATS(ctx, r, log)
	}
	if agent == nil {
		return fmt.Errorf("%w: no agent", ErrInvalidConfig)
	}
	var undo cleanup
	defer undo.run()
	return serve(ctx, r, agent, x, log, &undo)
}

// serve is run past the checks: everything it starts is stopped by undo,
// in reverse order, when run returns.
func serve(ctx context.Context, r resolved, agent runtime.Agent, x extras, base *slog.Logger, undo *cleanup) error {
	log := base.With(app.KeyDeployment, r.DeploymentID)
	if err := lockOwner(r, undo); err != nil {
		return err
	}
	conn := app.NewConnMetrics()
	url, nc, js, err := connect(ctx, r, log, conn, undo)
	if err != nil {
		return err
	}
	store, err := openStore(ctx, js, r, log)
	if err != nil {
		return err
	}
	if err := x.openExecLog(r.ProcessID, undo); err != nil {
		return err
	}
	faults, err := parseFaults(x.fault, log)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		conn.Collector())
	if agent, err = bindRemote(agent, nc, r, log, reg, undo); err != nil {
		return err
	}
	o, err := pool.New(r.poolConfig(nc, js, store, agent, base, reg, faults))
	if err != nil {
		return err
	}
	if r.MetricsListen != "" {
		stop, err := serveMetrics(r.MetricsListen, reg, nc, log)
		if err != nil {
			return err
		}
		undo.push(stop)
	}
	log.Info("owner ready", "nats", url, app.KeyProcess, r.ProcessID, "lease_ttl", r.LeaseTTL.String())
	if r.Ready != nil {
		undo.push(announce(ctx, nc, r, url))
	}
	err = o.Run(ctx)
	log.Info("owner shutting down")
	return err
}

// bindRemote connects a RemoteAgent to the process's connection: the
// pool gets the connected remote.Agent.
func bindRemote(agent runtime.Agent, nc *nats.Conn, r resolved, log *slog.Logger, reg prometheus.Registerer, undo *cleanup) (runtime.Agent, error) {
	ra, ok := agent.(*remoteAgent)
	if !ok {
		return agent, nil
	}
	c := ra.cfg
	a, err := remote.New(remote.Config{NC: nc, Names: r.names, Deployment: r.DeploymentID, EventKinds: c.EventKinds,
		UnavailableAfter: c.UnavailableAfter, HeartbeatInterval: c.HeartbeatInterval, HeartbeatTimeout: c.HeartbeatTimeout,
		InlineBytes: c.InlineBytes, Log: log, Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	undo.push(a.Close)
	ra.bound.Store(a)
	log.Info("steps run on remote workers", "subject", r.names.AgentStep(r.DeploymentID))
	return a, nil
}

// lockOwner takes cfg.LockFile when set.
func lockOwner(r resolved, undo *cleanup) error {
	if r.LockFile == "" {
		return nil
	}
	l, err := lockfile.Acquire(r.LockFile, holder(fmt.Sprintf("owner of deployment %s (process %s)", r.DeploymentID, r.ProcessID)))
	if err != nil {
		return lockError(err, "another owner of this deployment runs from here")
	}
	undo.push(func() { _ = l.Release() })
	return nil
}

// connect starts the embedded server when there is no NATSURL, connects,
// and ensures the topology.
func connect(ctx context.Context, r resolved, log *slog.Logger, m *app.ConnMetrics, undo *cleanup) (string, *nats.Conn, jetstream.JetStream, error) {
	url := r.NATSURL
	if url == "" {
		s, stop, err := embed(r.Config, log)
		if err != nil {
			return "", nil, nil, err
		}
		undo.push(stop)
		url = s.ClientURL()
	}
	nc, err := app.Connect(url, "baton-owner-"+r.DeploymentID, log, m)
	if err != nil {
		return "", nil, nil, err
	}
	undo.push(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		return "", nil, nil, err
	}
	if err := ensureTopology(ctx, js, r, log); err != nil {
		return "", nil, nil, err
	}
	return url, nc, js, nil
}

// openExecLog opens --exec-log and hands it to WithExecLog's hook.
func (x extras) openExecLog(processID string, undo *cleanup) error {
	if x.execLog == "" || x.attach == nil {
		return nil
	}
	l, err := execlog.OpenFileLog(x.execLog)
	if err != nil {
		return err
	}
	undo.push(func() { _ = l.Close() })
	x.attach(l, processID)
	return nil
}

// poolConfig is the pool's configuration of r.
func (r resolved) poolConfig(nc *nats.Conn, js jetstream.JetStream, store *kv.Store, agent runtime.Agent,
	log *slog.Logger, reg prometheus.Registerer, faults *failpoint.Registry) pool.Config {
	return pool.Config{
		NC: nc, JS: js, Store: store, Names: r.names, Deployment: r.DeploymentID, AgentName: r.AgentName,
		ProcessID: r.ProcessID, Agent: agent, Log: log,
		LeaseTTL: r.LeaseTTL, SweepInterval: r.SweepInterval, TaskAckWait: r.TaskAckWait, StepTimeout: r.StepTimeout,
		ChildSendTimeout: r.ChildSendTimeout,
		HibernateAfter:   r.HibernateAfter, EndIdleAfter: r.EndIdleAfter, RetainEnded: r.RetainEnded, MaxLoaded: r.MaxLoaded, InboxSweepInterval: r.InboxSweepInterval,
		IndexReconcileInterval: reconcileEvery(r.IndexReconcileInterval),
		DrainTimeout:           r.DrainTimeout, Registerer: reg, Failpoints: faults,
		QuarantineAfter: r.QuarantineAfter, QuarantineBackoff: slices.Clone(r.QuarantineBackoff),
		MaxStepsPerTurn: r.MaxStepsPerTurn, MaxTokensPerTurn: r.MaxTokensPerTurn, MaxTokensPerSession: r.MaxTokensPerSession,
		MaxDebounce: r.MaxDebounce,
		StepRetry:   runtime.RetryPolicy{Retries: r.StepRetries, Backoff: slices.Clone(r.StepRetryBackoff)},
		Tasks:       r.Tasks,
	}
}

// runNATS is NATSOnly: the embedded server until ctx ends.
func runNATS(ctx context.Context, r resolved, log *slog.Logger) error {
	s, stop, err := embed(r.Config, log)
	if err != nil {
		return err
	}
	defer stop()
	log.Info("NATS server ready", "url", s.ClientURL(), "store", r.DataDir, "pid", os.Getpid())
	<-ctx.Done()
	log.Info("NATS server shutting down")
	return nil
}

// cleanup is what a run undoes when it returns, last in first out.
type cleanup []func()

func (c *cleanup) push(f func()) { *c = append(*c, f) }

func (c *cleanup) run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
}

// reconcileEvery maps --index-reconcile-every onto the pool's setting:
// 0 (off) is the pool's negative.
func reconcileEvery(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
