package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime/eventlog"
	"github.com/baton-rt/baton/runtime/jsport"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// Owner runs the sessions of one owner process. It holds the process's
// main loop (Run, one lease period at a time) and its wiring; each part
// below is a type of its own with its own lock, if it has state
// (docs/driver.md, "The owner process's parts").
type Owner struct {
	cfg Config
	log *slog.Logger
	fp  points

	// Parts with state.
	lease  *lease      // this process's lease
	peers  peerSet     // the lease watch's view of the other processes
	reg    *registry   // the loaded sessions of the current lease period
	gate   *gate       // the quarantine gate: suspect slot, backoff, retries
	reconn *reconnects // the reconnect signal
	retire *retirement // retired deployments (cached)
	agents *agents     // this process's agent and the fleet view

	// Flows that need only some parts.
	out      *outside  // writes of sessions no run holds: quarantine, finish
	fin      *finisher // an operator's end or retry of a quarantined session
	wakes    *wakes    // wake requests to deployments' pools
	adoption *adopter  // the sessions of dead processes of this deployment
	sweeps   *sweeper  // the orphan and inbox sweeps
	resumes  *resumer  // this process's index, after each lease acquisition
	starts   *starter  // new sessions and handoff activations (the start subject)
	send     *sender   // commands to other sessions
	tasks    *tasks    // the deployment's durable background tasks

	state   jetstream.ObjectStore        // baton_state (set by Run)
	journal atomic.Pointer[kv.Journal]   // baton_journal (set by Run)
	inv     atomic.Pointer[kv.Inventory] // baton_blobs (set by Run)
	index   atomic.Pointer[kv.Index]     // the session index (set by Run)
	recon   *reconciler
	batches atomic.Pointer[eventlog.Batches] // fast batches of a commit's events (set by Run; nil: one at a time)
	txn     *handoff.Txn                     // nil: handoff disabled
	env     *session.Env                     // what every session of this process shares

	// Leader reads (kv): the backlog check (handoff, hibernation), inbox
	// messages by sequence (retired.go), the appenders' last events.
	backlog   kv.Backlog
	inboxMsgs kv.Stream
	events    kv.Stream

	wakeSem  chan struct{} // bounds the wakes served at once
	metrics  *metrics
	draining atomic.Bool
	drainCh  chan struct{} // closed when the drain begins
}

// New validates cfg and returns an Owner.
func New(cfg Config) (*Owner, error) {
	if err := subjects.ValidateDeployment(cfg.Deployment); err != nil {
		return nil, err
	}
	if err := subjects.ValidateSessionID(cfg.ProcessID); err != nil {
		return nil, fmt.Errorf("pool: process ID: %w", err)
	}
	if cfg.AgentName != "" {
		if err := subjects.ValidateAgent(cfg.AgentName); err != nil {
			return nil, fmt.Errorf("pool: agent name: %w", err)
		}
	}
	if cfg.NC == nil || cfg.JS == nil || cfg.Store == nil || cfg.Agent == nil {
		return nil, errors.New("pool: NC, JS, Store and Agent are required")
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
	o := &Owner{cfg: cfg, fp: points{cfg.Failpoints},
		peers: peerSet{m: map[string]peer{}}, reconn: newReconnects(cfg.NC), wakeSem: make(chan struct{}, maxWakes),
		drainCh: make(chan struct{}),
		backlog: kv.NewBacklog(cfg.JS, cfg.Names), inboxMsgs: kv.NewStream(cfg.JS, cfg.Names.InboxStream()),
		events: kv.NewStream(cfg.JS, cfg.Names.EventsStream()),
	}
	o.log = cfg.Log.With(slog.String("deployment", cfg.Deployment), slog.String("process", cfg.ProcessID))
	m, err := newMetrics(cfg.Registerer, func() float64 { return float64(len(o.Loaded())) })
	if err != nil {
		return nil, fmt.Errorf("pool: metrics: %w", err)
	}
	o.metrics = m
	o.reg = newRegistry(cfg.MaxLoaded, &o.draining, m)
	o.gate = newGate(cfg.QuarantineBackoff, cfg.Now)
	o.lease = &lease{cfg: &o.cfg, log: o.log, metrics: m, fp: o.fp, born: time.Now()}
	if !cfg.DisableHandoff {
		o.txn = &handoff.Txn{
			Store: cfg.Store, StartTimeout: cfg.HandoffStartTimeout,
			Starter:    handoff.NATSStarter{NC: cfg.NC, Names: cfg.Names},
			Backlog:    o.backlog,
			Failpoints: cfg.Failpoints,
		}
	}
	o.wakes = &wakes{nc: cfg.NC, names: cfg.Names, deployment: cfg.Deployment, log: o.log}
	o.tasks = &tasks{cfg: &o.cfg, log: o.log, live: cfg.live(m), wake: o.wakes.sendWake}
	o.out = &outside{cfg: &o.cfg, log: o.log, metrics: m, events: o.events,
		blobs: jsport.Blobs{Store: func() jsport.ObjectStore { return o.state }}, inv: jsport.Inventory{Open: o.inv.Load}}
	o.send = &sender{cfg: &o.cfg, log: o.log, metrics: m, lease: o.lease, wake: o.wakes.sendWake}
	o.adoption = &adopter{cfg: &o.cfg, log: o.log, peers: &o.peers, lease: o.lease, reg: o.reg, wakes: o.wakes,
		draining: &o.draining, drainCh: o.drainCh, wake: o.Wake}
	o.agents = &agents{cfg: &o.cfg}
	o.retire = &retirement{cfg: &o.cfg, log: o.log, peers: &o.peers, agents: o.agents}
	o.fin = &finisher{cfg: &o.cfg, log: o.log, metrics: m, lease: o.lease, reg: o.reg, peers: &o.peers, out: o.out, send: o.send,
		timers: cfg.timers(), erasers: eraser{kv: kv.NewEraser(cfg.JS, cfg.Names), blobs: o.out.blobs, inv: o.inv.Load,
			index: o.index.Load, state: func() jetstream.ObjectStore { return o.state }}}
	o.resumes = &resumer{cfg: &o.cfg, log: o.log, lease: o.lease, reg: o.reg, wake: o.Wake}
	o.sweeps = &sweeper{cfg: &o.cfg, log: o.log, metrics: m, reg: o.reg, peers: &o.peers, adoption: o.adoption, fin: o.fin,
		wakes: o.wakes, retire: o.retire, backlog: o.backlog, wake: o.Wake, index: o.index.Load}
	o.recon = &reconciler{cfg: &o.cfg, log: o.log, metrics: m, peers: &o.peers, agents: o.agents, index: o.index.Load, reg: o.reg}
	o.out.index = o.recon.indexLater
	o.recon.blobs = o.blobSizes
	if err := o.newEnv(); err != nil {
		return nil, err
	}
	o.starts = &starter{cfg: &o.cfg, log: o.log, fp: o.fp, lease: o.lease, reg: o.reg, env: o.env,
		spawn: o.spawn, restartLater: o.restartLater}
	return o, nil
}

func (o *Owner) now() time.Time { return o.cfg.Now() }

func newID() string { return ulid.Make().String() }

// newOwner is a new owner run of this process: the ownership a claim, a
// new session or a handoff activation writes.
func (c *Config) newOwner() record.Owner {
	return record.Owner{RunID: newID(), Deployment: c.Deployment, Process: c.ProcessID, WireV: wire.CurrentVersion}
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
	o.lease.instance = newID()
	if err := o.openStores(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	batches, err := eventlog.NewBatches(ctx, o.cfg.NC, o.cfg.JS, o.cfg.Names.EventsStream())
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	if batches == nil {
		o.log.Warn("the events stream does not allow fast batches (nats-server 2.14+ and topology.Ensure set it): a commit's events are published one at a time")
	}
	o.batches.Store(batches)
	defer batches.Close()
	if err := o.agents.enroll(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
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
	if err := o.agents.follow(runCtx, o.log.Warn); err != nil {
		return err
	}
	var bg sync.WaitGroup
	bg.Go(func() { o.adoption.watchPeers(runCtx) })
	bg.Go(func() { o.reconn.watch(runCtx) })
	errc := make(chan error, 1)
	go func() { errc <- o.tasks.runTasks(ctx) }() // no new tasks once draining
	advertise(runCtx, &o.cfg, o.log, o.fp)
	for runCtx.Err() == nil {
		if err := o.lease.acquire(runCtx); err != nil {
			break
		}
		o.serve(runCtx)
		sleep(runCtx, 100*time.Millisecond) // a fence that repeats must not spin
	}
	o.unregister()
	o.lease.release()
	bg.Wait()
	return <-errc
}

// blobSizes sums the size of every object of the state store by the
// session its name starts with (<sessionID>/<digest>): one listing.
func (o *Owner) blobSizes(ctx context.Context) (map[string]int64, error) {
	if o.state == nil {
		return nil, errors.New("pool: the state object store is not open")
	}
	infos, err := o.state.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return map[string]int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, info := range infos {
		if id, _, ok := strings.Cut(info.Name, "/"); ok {
			out[id] += int64(info.Size)
		}
	}
	return out, nil
}

// openStores opens the state object store, the journal, the blob
// inventory and the session index (nil error when ctx ended meanwhile: a
// clean shutdown). Each open is tried again, with backoff, for up to
// storesOpenBudget, each try bounded to storesOpenTry: a cluster still
// settling (an election, a loaded node) answers late, and an owner that
// exited for it would have to be restarted by hand.
func (o *Owner) openStores(ctx context.Context) error {
	opens := []struct {
		what string
		open func(context.Context) error
	}{
		{"state object store", func(ctx context.Context) error {
			state, err := o.cfg.JS.ObjectStore(ctx, o.cfg.Names.StateBucket())
			o.state = state
			return err
		}},
		{"journal", func(ctx context.Context) error {
			j, err := kv.OpenJournal(ctx, o.cfg.JS, o.cfg.Names)
			o.journal.Store(j)
			return err
		}},
		{"blob inventory", func(ctx context.Context) error {
			inv, err := kv.OpenInventory(ctx, o.cfg.JS, o.cfg.Names)
			o.inv.Store(inv)
			return err
		}},
		{"session index", func(ctx context.Context) error {
			x, err := kv.OpenIndex(ctx, o.cfg.JS, o.cfg.Names)
			o.index.Store(x)
			return err
		}},
	}
	for _, s := range opens {
		b := backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithMaxInterval(time.Second),
			backoff.WithMaxElapsedTime(storesOpenBudget)), ctx)
		err := backoff.Retry(func() error {
			tctx, cancel := context.WithTimeout(ctx, storesOpenTry)
			defer cancel()
			err := s.open(tctx)
			if err != nil && ctx.Err() == nil {
				o.log.Debug("opening a store failed; trying again", "store", s.what, "err", err)
			}
			return err
		}, b)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("pool: %s: %w", s.what, err)
		}
	}
	return nil
}

// storesOpenTry bounds one try of opening a store; storesOpenBudget all
// of them.
const (
	storesOpenTry    = 5 * time.Second
	storesOpenBudget = 30 * time.Second
)

// unregister removes this process's registration when it stops with an
// empty index (a drain hibernated or handed on every session), while its
// lease key is still held, so a restart under the same ID registers after
// it. With sessions left, the registration stays for their adopter, which
// removes it once it adopted them all.
func (o *Owner) unregister() {
	ctx, cancel := context.WithTimeout(context.Background(), o.cfg.leaseCall())
	defer cancel()
	ids, err := o.cfg.Store.ListIndex(ctx, o.cfg.ProcessID)
	if err != nil || len(ids) > 0 {
		return
	}
	if err := o.cfg.Store.UnregisterProcess(ctx, o.cfg.Deployment, o.cfg.ProcessID); err != nil {
		o.log.Debug("unregister the process", "err", err)
	}
}

// serve runs one lease period: until ctx ends or the process is fenced.
func (o *Owner) serve(parent context.Context) {
	ctx, cancel := context.WithCancelCause(parent)
	o.reg.begin(ctx)
	o.lease.setCancel(cancel)
	defer func() {
		o.reg.cancel(cancel)
		o.lease.invalidate()
		o.reg.stopAll()
	}()
	o.reg.goBG(ctx, func() { o.lease.renewLoop(ctx) })
	// Registered before any index entry of this period: a sweep finds a
	// process whose index may hold sessions by its registration.
	if err := o.cfg.Store.RegisterProcess(ctx, o.cfg.Deployment, o.cfg.ProcessID); err != nil {
		if ctx.Err() == nil {
			o.log.Error("register the process failed; fencing to retry", "err", err)
			o.lease.fence(fmt.Errorf("register process: %w", err))
		}
		return
	}
	// Resume the index before serving start requests: start indexes a new
	// session before it runs it, so a resume listing the index meanwhile
	// would claim that session a second time in this process.
	o.resumes.resume(ctx)
	var subs []*nats.Subscription
	defer func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}()
	pool := o.cfg.Names.QueueGroup(o.cfg.Deployment)
	for _, s := range []struct {
		subject, queue string
		handler        nats.MsgHandler
	}{
		{o.cfg.Names.Start(o.cfg.Deployment), pool, o.starts.serveStart},
		{o.cfg.Names.Wake(o.cfg.Deployment), pool, o.serveWake},
		{o.cfg.Names.Finish(o.cfg.Deployment), pool, o.fin.serveFinish(false)},
		{o.cfg.Names.FinishAny(), o.cfg.Names.FinishQueueGroup(), o.fin.serveFinish(true)},
	} {
		sub, err := o.cfg.NC.QueueSubscribe(s.subject, s.queue, s.handler)
		if err != nil {
			o.log.Error("subscribe failed; fencing to retry", "subject", s.subject, "err", err)
			o.lease.fence(fmt.Errorf("subscribe %s: %w", s.subject, err))
			return
		}
		subs = append(subs, sub)
	}
	o.reg.goBG(ctx, func() { o.sweeps.sweepLoop(ctx) })
	o.reg.goBG(ctx, func() { o.sweeps.inboxSweepLoop(ctx) })
	o.reg.goBG(ctx, func() { o.recon.reconcileLoop(ctx) })
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

// The handoff transaction's store and backlog check are kv's.
var (
	_ handoff.Store   = (*kv.Store)(nil)
	_ handoff.Backlog = kv.Backlog{}
)
