package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/protocol"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
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

// Config wires an Owner to its NATS connection, store and agent.
type Config struct {
	NC         *nats.Conn
	JS         jetstream.JetStream
	Store      *kv.Store
	Names      subjects.Names
	Deployment string // exact deployment of this process
	ProcessID  string // this owner process, stable across restarts: its lease key and session index
	Agent      runtime.Agent
	Events     *wire.EventRegistry // built-ins plus the agent's kinds; nil = built-ins + Agent.EventKinds
	Log        *slog.Logger
	// TickInterval paces clock ticks and purges (default 1 s).
	TickInterval time.Duration
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
	// TaskAckWait is the ack wait of the deployment's task consumer
	// (default 30 s): a task whose runner died runs again after it.
	TaskAckWait time.Duration
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
	// HibernateAfter is how long a quiet session (no step running; it may
	// await input, an authorization, a task or a resume) stays loaded
	// before it hibernates (default 5 min; negative: never, except under
	// MaxLoaded).
	HibernateAfter time.Duration
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
	// Faults injects failures in tests; nil in production.
	Faults *Faults
	// Now is the machine's clock (default time.Now). Leases always use the
	// real monotonic clock.
	Now func() time.Time
}

// Faults are deterministic fault injection points for tests. cmd/owner's
// hidden --fault flag wires the After* hooks to SIGKILL the process.
type Faults struct {
	// LoseCommitReply reports, per commit, whether to drop the reply of a
	// commit CAS that landed (the write is durable, the owner is told it is
	// uncertain).
	LoseCommitReply func(sessionID string) bool
	// AliasHooked runs after a live session created the hook of a new alias
	// and before it recreates its consumer over the alias's subject, so a
	// test can publish into that window.
	AliasHooked func(sessionID, alias string)
	// LoseLeaseReply reports, per lease renewal that landed, whether to
	// drop its reply (the renewal is settled by reading the lease back).
	LoseLeaseReply func() bool
	// AfterCommit runs right after a commit CAS succeeded, before any of
	// the commit's events is published.
	AfterCommit func(sessionID string)
	// AfterIndex runs when Load (recovery, wake, takeover) has written the
	// index entry and before it claims the session.
	AfterIndex func(sessionID string)
	// AfterClaim runs when Load's claim CAS succeeded, before the consumer
	// is created.
	AfterClaim func(sessionID string)
	// RefuseActivation reports, per handoff request this process serves as
	// the target, whether its checkpoint validation fails (the target
	// cannot read the checkpoint; the source keeps the session).
	RefuseActivation func(sessionID string) bool
	// DropWake reports, per wake request received from another process
	// (ingress, task runner, sweeper of a peer), whether to ignore it, as
	// if it was lost in flight.
	DropWake func(req protocol.WakeRequest) bool
	// Hibernating runs at each step of a hibernation: "cas" (the record
	// says hibernated, the consumer still delivers), "consumer" (the
	// consumer is deleted, the session is still in memory) and "left"
	// (out of memory, before the inbox re-check), so a test can publish
	// into each window.
	Hibernating func(sessionID, step string)
	// HandoffSource injects faults at the named steps of the handoff
	// transaction this process runs as a source (handoff.Txn.Hooks; the
	// steps of handoff/plan.go, docs/handoff.md "Crash points"): a non-nil
	// error stops the transaction there, as a crash would, and the session
	// stops unresolved.
	HandoffSource handoff.Hooks
	// HandoffCandidate injects faults at the named steps of the activations
	// this process serves as a handoff candidate (handoff.Candidate.Hooks):
	// a non-nil error stops the activation there, as a crash would.
	HandoffCandidate handoff.Hooks
	// AfterConsumer runs when a session's run has created its inbox
	// consumer, before it deletes the predecessor's consumer and boots the
	// machine. A non-nil error stops the run there, as a crash would.
	AfterConsumer func(sessionID string, reason runtime.BootReason) error
	// HoldLeaseRenewal reports, per due lease renewal, whether to skip it
	// (a process frozen past its lease): the process fences itself once the
	// lease was not renewed in time, and the server expires it.
	HoldLeaseRenewal func() bool
}

func (f *Faults) hibernating(id, step string) {
	if f != nil && f.Hibernating != nil {
		f.Hibernating(id, step)
	}
}

func (f *Faults) dropWake(req protocol.WakeRequest) bool {
	return f != nil && f.DropWake != nil && f.DropWake(req)
}

func (f *Faults) handoffSource() handoff.Hooks {
	if f == nil {
		return handoff.Hooks{}
	}
	return f.HandoffSource
}

func (f *Faults) handoffCandidate() handoff.Hooks {
	if f == nil {
		return handoff.Hooks{}
	}
	return f.HandoffCandidate
}

func (f *Faults) afterConsumer(id string, reason runtime.BootReason) error {
	if f == nil || f.AfterConsumer == nil {
		return nil
	}
	return f.AfterConsumer(id, reason)
}

func (f *Faults) holdLeaseRenewal() bool {
	return f != nil && f.HoldLeaseRenewal != nil && f.HoldLeaseRenewal()
}

func (f *Faults) refuseActivation(id string) bool {
	return f != nil && f.RefuseActivation != nil && f.RefuseActivation(id)
}

func (f *Faults) loseCommitReply(id string) bool {
	return f != nil && f.LoseCommitReply != nil && f.LoseCommitReply(id)
}

func (f *Faults) aliasHooked(id, alias string) {
	if f != nil && f.AliasHooked != nil {
		f.AliasHooked(id, alias)
	}
}

func (f *Faults) loseLeaseReply() bool {
	return f != nil && f.LoseLeaseReply != nil && f.LoseLeaseReply()
}

func (f *Faults) afterCommit(id string) {
	if f != nil && f.AfterCommit != nil {
		f.AfterCommit(id)
	}
}

func (f *Faults) afterIndex(id string) {
	if f != nil && f.AfterIndex != nil {
		f.AfterIndex(id)
	}
}

func (f *Faults) afterClaim(id string) {
	if f != nil && f.AfterClaim != nil {
		f.AfterClaim(id)
	}
}

// Owner runs the sessions of one owner process.
type Owner struct {
	cfg      Config
	log      *slog.Logger
	faults   *Faults
	instance string    // nonce of this Run, written into the lease
	born     time.Time // monotonic origin of validUntil

	mu        sync.Mutex
	sessions  map[string]*loaded
	loading   map[string]bool // claims in progress (create or Load)
	restarts  map[string]int  // consecutive failed runs per session
	retrying  map[string]bool // boot attempts scheduled after the quarantine backoff
	suspect   string          // the counted boot this process runs now (quarantine.go)
	suspectAt time.Time
	wg        sync.WaitGroup        // session goroutines
	bg        sync.WaitGroup        // adoption, wake and restart goroutines
	ctx       context.Context       // the serving context of the current lease period
	state     jetstream.ObjectStore // baton_state (set by Run)
	txn       *handoff.Txn          // nil: handoff disabled
	env       *session.Env          // what every session of this process shares

	// Leader reads (kv): the backlog check (handoff, hibernation), inbox
	// messages by sequence (retired.go), the appenders' last events.
	backlog   kv.Backlog
	inboxMsgs kv.Stream
	events    kv.Stream

	lease    leaseState
	peers    peerSet
	wakeSem  chan struct{}
	reconnMu sync.Mutex
	reconnCh chan struct{} // closed and replaced on every reconnect
	room     chan struct{} // closed and replaced when a session leaves or a claim ends
	metrics  *metrics
	draining atomic.Bool
	settling int           // hibernated sessions whose inbox re-check runs (o.mu)
	drainCh  chan struct{} // closed when the drain begins
	retired  retiredSet
}

type loaded struct {
	s      *session.Session
	cancel context.CancelFunc
	done   chan struct{}
}

// New validates cfg and returns an Owner.
func New(cfg Config) (*Owner, error) {
	if err := subjects.ValidateDeployment(cfg.Deployment); err != nil {
		return nil, err
	}
	if err := subjects.ValidateSessionID(cfg.ProcessID); err != nil {
		return nil, fmt.Errorf("driver: process ID: %w", err)
	}
	if cfg.NC == nil || cfg.JS == nil || cfg.Store == nil || cfg.Agent == nil {
		return nil, errors.New("driver: NC, JS, Store and Agent are required")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validateDurability(); err != nil {
		return nil, err
	}
	if cfg.Events == nil {
		reg, err := agentEvents(cfg.Agent)
		if err != nil {
			return nil, err
		}
		cfg.Events = reg
	}
	o := &Owner{cfg: cfg, faults: cfg.Faults, born: time.Now(),
		sessions: map[string]*loaded{}, loading: map[string]bool{}, restarts: map[string]int{}, retrying: map[string]bool{},
		peers: peerSet{m: map[string]peer{}}, reconnCh: make(chan struct{}), wakeSem: make(chan struct{}, maxWakes),
		ctx: canceled(), room: make(chan struct{}), drainCh: make(chan struct{}),
		backlog: kv.NewBacklog(cfg.JS, cfg.Names), inboxMsgs: kv.NewStream(cfg.JS, cfg.Names.InboxStream()),
		events: kv.NewStream(cfg.JS, cfg.Names.EventsStream()),
	}
	m, err := newMetrics(cfg.Registerer, func() float64 { return float64(len(o.Loaded())) })
	if err != nil {
		return nil, fmt.Errorf("driver: metrics: %w", err)
	}
	o.metrics = m
	if !cfg.DisableHandoff {
		o.txn = &handoff.Txn{
			Store: cfg.Store, StartTimeout: cfg.HandoffStartTimeout,
			Starter: handoff.NATSStarter{NC: cfg.NC, Names: cfg.Names},
			Backlog: o.backlog,
			Hooks:   cfg.Faults.handoffSource(),
		}
	}
	o.log = cfg.Log.With(slog.String("deployment", cfg.Deployment), slog.String("process", cfg.ProcessID))
	if err := o.newEnv(); err != nil {
		return nil, err
	}
	return o, nil
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
	if c.StepTimeout == 0 {
		c.StepTimeout = DefaultStepTimeout
	}
	if c.QuarantineAfter == 0 {
		c.QuarantineAfter = DefaultQuarantineAfter
	}
	if c.QuarantineBackoff == nil {
		c.QuarantineBackoff = DefaultQuarantineBackoff
	}
	return c
}

func (c Config) validateDurability() error {
	switch {
	case c.LeaseTTL < kv.MinLeaseTTL || c.LeaseTTL%time.Second != 0:
		return fmt.Errorf("driver: lease TTL %v: must be a whole number of seconds, at least %v", c.LeaseTTL, kv.MinLeaseTTL)
	case c.LeaseRenew <= 0 || c.LeaseRenew >= c.fenceAfter():
		return fmt.Errorf("driver: lease renewal period %v: must be positive and shorter than %v (TTL − TTL/4)", c.LeaseRenew, c.fenceAfter())
	case c.InboxSweepInterval > 5*time.Second:
		return fmt.Errorf("driver: inbox sweep interval %v: at most 5s (the bound on a lost wake)", c.InboxSweepInterval)
	case c.MaxLoaded < 0:
		return fmt.Errorf("driver: max loaded sessions %d: must not be negative", c.MaxLoaded)
	case c.StepTimeout < 0:
		return fmt.Errorf("driver: step timeout %v: must not be negative", c.StepTimeout)
	case c.SweepInterval < 0 || c.TaskAckWait < time.Second:
		return fmt.Errorf("driver: sweep interval %v / task ack wait %v out of range", c.SweepInterval, c.TaskAckWait)
	case c.QuarantineAfter < 1:
		return fmt.Errorf("driver: quarantine after %d attempts: must be at least 1", c.QuarantineAfter)
	case slices.ContainsFunc(c.QuarantineBackoff, func(d time.Duration) bool { return d < 0 }):
		return fmt.Errorf("driver: quarantine backoff %v: no step may be negative", c.QuarantineBackoff)
	}
	return nil
}

// fenceAfter is how long after a renewal was sent the lease counts as held:
// a quarter of the TTL before the server can expire it.
func (c Config) fenceAfter() time.Duration { return c.LeaseTTL - c.LeaseTTL/4 }

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func (o *Owner) now() time.Time { return o.cfg.Now() }

func newID() string { return ulid.Make().String() }

// newOwner is a new owner run of this process: the ownership a claim, a
// new session or a handoff activation writes.
func (o *Owner) newOwner() record.Owner {
	return record.Owner{RunID: newID(), Deployment: o.cfg.Deployment, Process: o.cfg.ProcessID, WireV: wire.CurrentVersion}
}

// Run holds this process's lease, resumes the sessions of its index, serves
// start and wake requests, adopts the sessions of dead processes of its
// deployment and runs tasks until ctx ends; then it stops every session (a
// running step is abandoned: its uncommitted work re-runs on the next owner)
// and releases the lease, so a peer adopts the sessions at once.
//
// The lease comes first: the process acquires it (waiting for a previous
// run's lease to expire) before it resumes anything. When it cannot renew
// the lease in time it fences itself — every session stops, no request is
// served — and then acquires the lease again and resumes its index by fresh
// claims.
func (o *Owner) Run(ctx context.Context) error {
	o.instance = newID()
	state, err := o.cfg.JS.ObjectStore(ctx, o.cfg.Names.StateBucket())
	if ctx.Err() != nil {
		return nil // stopped while starting: a clean shutdown
	}
	if err != nil {
		return fmt.Errorf("driver: state object store: %w", err)
	}
	o.state = state
	// With a drain timeout, the end of ctx starts a graceful drain; the
	// process's own context ends when the drain is done (or timed out).
	runCtx := ctx
	if o.cfg.DrainTimeout > 0 {
		var abort context.CancelFunc
		runCtx, abort = context.WithCancel(context.WithoutCancel(ctx))
		defer abort()
		go func() {
			select {
			case <-ctx.Done():
				o.drain(runCtx)
				abort()
			case <-runCtx.Done():
			}
		}()
	}
	var bg sync.WaitGroup
	bg.Go(func() { o.watchPeers(runCtx) })
	bg.Go(func() { o.watchReconnects(runCtx) })
	errc := make(chan error, 1)
	go func() { errc <- o.runTasks(ctx) }() // no new tasks once draining
	for runCtx.Err() == nil {
		if err := o.acquire(runCtx); err != nil {
			break
		}
		o.serve(runCtx)
		sleep(runCtx, 100*time.Millisecond) // a fence that repeats must not spin
	}
	o.release()
	bg.Wait()
	return <-errc
}

// serve runs one lease period: until ctx ends or the process is fenced.
func (o *Owner) serve(parent context.Context) {
	ctx, cancel := context.WithCancelCause(parent)
	o.mu.Lock()
	o.ctx = ctx
	o.mu.Unlock()
	o.lease.setCancel(cancel)
	defer func() {
		o.mu.Lock() // orders the cancel with goBG's check (see goBG)
		cancel(nil)
		o.mu.Unlock()
		o.invalidate()
		o.stopAll()
		o.bg.Wait()
	}()
	o.goBG(ctx, func() { o.renewLoop(ctx) })
	// Resume the index before serving start requests: start indexes a new
	// session before it runs it, so a resume listing the index meanwhile
	// would claim that session a second time in this process.
	if err := o.resumeIndex(ctx); err != nil {
		o.log.Error("resume failed", "err", err)
	}
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	for _, s := range []struct {
		subject string
		handler nats.MsgHandler
	}{
		{o.cfg.Names.Start(o.cfg.Deployment), o.serveStart},
		{o.cfg.Names.Wake(o.cfg.Deployment), o.serveWake},
	} {
		sub, err := o.cfg.NC.QueueSubscribe(s.subject, o.cfg.Names.QueueGroup(o.cfg.Deployment), s.handler)
		if err != nil {
			o.log.Error("subscribe failed; fencing to retry", "subject", s.subject, "err", err)
			o.fence(fmt.Errorf("subscribe %s: %w", s.subject, err))
			return
		}
		subs = append(subs, sub)
	}
	o.goBG(ctx, func() { o.sweepLoop(ctx) })
	o.goBG(ctx, func() { o.inboxSweepLoop(ctx) })
	// The subscriptions are registered with the server once a round trip
	// has passed: only then is "serving" true for a requester on another
	// connection (without it, a start right after the log line can meet
	// "no responders").
	if err := o.cfg.NC.FlushTimeout(5 * time.Second); err != nil {
		o.log.Warn("flush after subscribing", "err", err)
	}
	o.log.Info("owner serving", "start", o.cfg.Names.Start(o.cfg.Deployment), "wake", o.cfg.Names.Wake(o.cfg.Deployment))
	select {
	case <-ctx.Done():
	case <-o.drainCh:
		// Draining: no new starts, wakes or handoff activations here; the
		// pool's other processes take them.
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
		subs = nil
		<-ctx.Done()
	}
	if cause := context.Cause(ctx); errors.Is(cause, ErrFenced) {
		o.log.Warn("fenced: stopping every session", "cause", cause)
	}
}

// servingCtx is the context of the current lease period (canceled while
// fenced).
func (o *Owner) servingCtx() context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.ctx
}

// resumeIndex re-claims every session this process's index names, each by
// a fresh claim CAS. An entry for a session another process runs now is
// stale (a crash between index and claim, or a takeover) and is dropped.
func (o *Owner) resumeIndex(ctx context.Context) error {
	ids, err := o.cfg.Store.ListIndex(ctx, o.cfg.ProcessID)
	if err != nil && !errors.Is(err, record.ErrNotFound) {
		return fmt.Errorf("driver: list index: %w", err)
	}
	// A few at a time: a process resuming hundreds of sessions after a
	// fence must not take a round trip chain per session in series.
	eachBounded(ctx, ids, resumeParallel, func(id string) { o.resumeOne(ctx, id) })
	return nil
}

// resumeParallel bounds the claims a resume runs at once.
const resumeParallel = 16

func (o *Owner) resumeOne(ctx context.Context, id string) {
	rep := o.Wake(ctx, protocol.WakeRequest{SessionID: id, From: o.cfg.ProcessID, Source: protocol.WakeResume})
	switch {
	case rep.Error != nil:
		// The orphan sweeper re-claims it (the record names this process).
		o.log.Warn("resume failed", "session", id, "err", rep.Error.Message)
	case staleEntry(rep.Outcome):
		if err := o.cfg.Store.RemoveIndex(ctx, o.cfg.ProcessID, id); err != nil {
			o.log.Warn("drop stale index entry", "session", id, "err", err)
		}
	}
}

// staleEntry reports a wake outcome after which this process's index
// entry of the session is stale: it runs elsewhere, is gone, or no owner
// runs it (quarantined).
func staleEntry(out protocol.WakeOutcome) bool {
	return out == protocol.WakeElsewhere || out == protocol.WakeMissing || out == protocol.WakeQuarantined
}

func (o *Owner) stopAll() {
	o.mu.Lock()
	for _, l := range o.sessions {
		l.cancel()
	}
	o.mu.Unlock()
	o.wg.Wait()
}

// Loaded reports the IDs of the sessions this owner runs.
func (o *Owner) Loaded() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := make([]string, 0, len(o.sessions))
	for id := range o.sessions {
		ids = append(ids, id)
	}
	return ids
}

// beginLoad reserves id for one claim in this process; false if the session
// runs here or another claim of it is in progress.
func (o *Owner) beginLoad(id string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.sessions[id]; ok || o.loading[id] {
		return false
	}
	o.loading[id] = true
	return true
}

// localStopWait bounds how long a handoff start waits for this process's own
// previous run of the session to exit.
const localStopWait = 2 * time.Second

// awaitStopped waits up to timeout for this process's run of id (if any) to
// exit. A run that is the live owner does not exit, and the caller refuses.
func (o *Owner) awaitStopped(id string, timeout time.Duration) {
	o.mu.Lock()
	l, ok := o.sessions[id]
	o.mu.Unlock()
	if !ok {
		return
	}
	select {
	case <-l.done:
	case <-time.After(timeout):
	}
}

func (o *Owner) endLoad(id string) {
	o.mu.Lock()
	delete(o.loading, id)
	o.freed()
	o.mu.Unlock()
}

// spawn runs a claimed session in its own goroutine. A run that fails (not
// fenced, not stopped by a lost CAS, not ended) is restarted by a fresh
// claim after a backoff, so no session is left without a running owner.
//
// A claim that completes after the lease period ended (a handoff activation
// or a wake racing with a fence or shutdown) does not run: serve's stopAll
// may be waiting on wg already, and an Add from zero concurrent with that
// Wait is a WaitGroup misuse. The cancel under o.mu orders this check with
// stopAll, as in goBG; the session is resumed by the next claim (this
// process's resume after it re-acquires its lease, or a peer's adoption).
func (o *Owner) spawn(s *session.Session, reason runtime.BootReason) {
	s.Touch()
	o.mu.Lock()
	if o.ctx.Err() != nil {
		o.mu.Unlock()
		o.log.Warn("claimed after the lease period ended; not running it here now (the next claim resumes it)", "session", s.ID())
		return
	}
	ctx, cancel := context.WithCancel(o.ctx)
	l := &loaded{s: s, cancel: cancel, done: make(chan struct{})}
	o.sessions[s.ID()] = l
	o.metrics.loadedNow(len(o.sessions))
	o.wg.Add(1)
	o.mu.Unlock()
	go func() {
		defer o.wg.Done()
		defer close(l.done)
		defer cancel()
		began := time.Now()
		err := s.Run(ctx, reason)
		o.stopped(ctx, l, err, time.Since(began))
	}()
}

// stopped is what follows a session's run: it leaves the loaded set, and
// is re-checked (hibernated), restarted (failed) or let go (moved on).
func (o *Owner) stopped(ctx context.Context, l *loaded, err error, ran time.Duration) {
	s, id := l.s, l.s.ID()
	log := o.log.With(slog.String("session", id), slog.Uint64("epoch", s.Epoch()))
	o.dropSuspect(id)
	o.mu.Lock()
	if o.sessions[id] == l {
		delete(o.sessions, id)
		o.metrics.loadedNow(len(o.sessions))
		o.freed()
	}
	if s.Hibernated() {
		o.settling++ // until its re-check is done (drain waits)
	}
	o.mu.Unlock()
	switch {
	case s.Hibernated() && ctx.Err() == nil:
		o.recheckHibernated(ctx, s)
	case errors.Is(err, ErrFenced) || errors.Is(context.Cause(ctx), ErrFenced):
		// One WARN for the process ("fenced: stopping every session");
		// the session resumes by a fresh claim once the lease is back.
		log.Debug("session stopped: process fenced")
	case err != nil && ctx.Err() == nil:
		log.Error("session stopped", "err", err)
		o.restartLater(id, ran)
	case err != nil:
		log.Debug("session stopped", "err", err)
	case ctx.Err() == nil && s.Ended() == "":
		o.lost(ctx, id)
	}
	if s.Hibernated() {
		o.mu.Lock()
		o.settling--
		o.freed()
		o.mu.Unlock()
	}
}

// lost handles a session that stopped because its record moved on (a lost
// CAS, a successor's claim): if the record now names another process, this
// process's index entry is stale and removed; if it still names this
// process (its own write landed late), the session is claimed afresh.
func (o *Owner) lost(ctx context.Context, id string) {
	cur, err := o.cfg.Store.LeaderSession(ctx, id)
	switch {
	case err != nil:
		return // the sweeper decides later
	case cur.Record.OwnerProcess == o.cfg.ProcessID:
		o.restartLater(id, 0)
	default:
		if err := o.cfg.Store.RemoveIndex(ctx, o.cfg.ProcessID, id); err != nil {
			o.log.Debug("remove stale index entry", "session", id, "err", err)
		}
	}
}

// restartLater re-claims a session whose run failed, after a backoff that
// grows with consecutive quick failures.
func (o *Owner) restartLater(id string, ran time.Duration) {
	o.mu.Lock()
	if ran > time.Minute {
		o.restarts[id] = 0
	}
	n := o.restarts[id]
	o.restarts[id] = n + 1
	ctx := o.ctx
	o.mu.Unlock()
	delay := min(time.Second<<min(n, 5), 30*time.Second)
	o.goBG(ctx, func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		rep := o.Wake(ctx, protocol.WakeRequest{SessionID: id, From: o.cfg.ProcessID, Source: protocol.WakeRestart})
		o.log.Info("restarted a failed session", "session", id, "outcome", rep.Outcome, "error", rep.Error)
		if staleEntry(rep.Outcome) {
			// It runs elsewhere now (a handoff that completed after all),
			// or no owner runs it: this process's index entry is stale.
			if err := o.cfg.Store.RemoveIndex(ctx, o.cfg.ProcessID, id); err != nil {
				o.log.Debug("remove stale index entry", "session", id, "err", err)
			}
		}
	})
}

// watchReconnects signals every session after the connection reconnected:
// consumers are memory-storage and vanish when the server restarts.
func (o *Owner) watchReconnects(ctx context.Context) {
	last := o.cfg.NC.Stats().Reconnects
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n := o.cfg.NC.Stats().Reconnects; n != last {
			last = n
			o.reconnMu.Lock()
			close(o.reconnCh)
			o.reconnCh = make(chan struct{})
			o.reconnMu.Unlock()
		}
	}
}

// reconnected is closed at the next reconnect.
func (o *Owner) reconnected() <-chan struct{} {
	o.reconnMu.Lock()
	defer o.reconnMu.Unlock()
	return o.reconnCh
}

// The handoff transaction's store and backlog check are kv's.
var (
	_ handoff.Store   = (*kv.Store)(nil)
	_ handoff.Backlog = kv.Backlog{}
)
