package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
)

// Config wires an Owner to its NATS connection, store and agent.
type Config struct {
	NC         *nats.Conn
	JS         jetstream.JetStream
	Store      *kv.Store
	Names      subjects.Names
	Deployment string // exact deployment of this process
	ProcessID  string // this owner process; its session index lives under it
	Agent      runtime.Agent
	Events     *wire.EventRegistry // built-ins plus the agent's kinds; nil = built-ins + Agent.EventKinds
	Log        *slog.Logger
	// TickInterval paces clock ticks and purges (default 1 s).
	TickInterval time.Duration
	// Faults injects failures in tests; nil in production.
	Faults *Faults
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Faults are deterministic fault injection points for tests.
type Faults struct {
	// LoseCommitReply reports, per commit, whether to drop the reply of a
	// commit CAS that landed (the write is durable, the owner is told it is
	// uncertain).
	LoseCommitReply func(sessionID string) bool
	// AliasHooked runs after a live session created the hook of a new alias
	// and before it recreates its consumer over the alias's subject, so a
	// test can publish into that window.
	AliasHooked func(sessionID, alias string)
}

func (f *Faults) loseCommitReply(id string) bool {
	return f != nil && f.LoseCommitReply != nil && f.LoseCommitReply(id)
}

func (f *Faults) aliasHooked(id, alias string) {
	if f != nil && f.AliasHooked != nil {
		f.AliasHooked(id, alias)
	}
}

// Owner runs the sessions of one owner process.
type Owner struct {
	cfg    Config
	log    *slog.Logger
	faults *Faults

	mu       sync.Mutex
	sessions map[string]*loaded
	wg       sync.WaitGroup
	ctx      context.Context // the serving context, set by Run
	state    jetstream.ObjectStore
}

type loaded struct {
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
	if cfg.Events == nil {
		reg, err := agentEvents(cfg.Agent)
		if err != nil {
			return nil, err
		}
		cfg.Events = reg
	}
	o := &Owner{cfg: cfg, faults: cfg.Faults, sessions: map[string]*loaded{}}
	o.log = cfg.Log.With(slog.String("deployment", cfg.Deployment), slog.String("process", cfg.ProcessID))
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
	return c
}

func (o *Owner) now() time.Time { return o.cfg.Now() }

func newID() string { return ulid.Make().String() }

// Run serves start requests, resumes the sessions of this process's index
// and runs tasks until ctx ends; then it stops every session (a running step
// is abandoned: its uncommitted work re-runs on the next owner).
func (o *Owner) Run(ctx context.Context) error {
	o.ctx = ctx
	state, err := o.cfg.JS.ObjectStore(ctx, o.cfg.Names.StateBucket())
	if err != nil {
		return fmt.Errorf("driver: state object store: %w", err)
	}
	o.state = state
	// Resume the index before serving start requests: start indexes a new
	// session before it runs it, so a resume listing the index meanwhile
	// would claim that session a second time in this process.
	if err := o.resumeIndex(ctx); err != nil {
		o.stopAll()
		return err
	}
	sub, err := o.cfg.NC.QueueSubscribe(o.cfg.Names.Start(o.cfg.Deployment), o.cfg.Names.QueueGroup(o.cfg.Deployment), o.serveStart)
	if err != nil {
		o.stopAll()
		return fmt.Errorf("driver: subscribe start: %w", err)
	}
	defer sub.Unsubscribe()
	errc := make(chan error, 1)
	go func() { errc <- o.runTasks(ctx) }()
	o.log.Info("owner serving", "start", o.cfg.Names.Start(o.cfg.Deployment))
	<-ctx.Done()
	_ = sub.Unsubscribe()
	o.stopAll()
	return <-errc
}

// resumeIndex loads every session this process's index names.
func (o *Owner) resumeIndex(ctx context.Context) error {
	ids, err := o.cfg.Store.ListIndex(ctx, o.cfg.ProcessID)
	if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return fmt.Errorf("driver: list index: %w", err)
	}
	for _, id := range ids {
		if err := o.Load(ctx, id, runtime.BootRecover); err != nil {
			o.log.Warn("resume failed", "session", id, "err", err)
		}
	}
	return nil
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

// spawn runs a claimed session in its own goroutine.
func (o *Owner) spawn(s *session, reason runtime.BootReason) {
	ctx, cancel := context.WithCancel(o.ctx)
	l := &loaded{cancel: cancel, done: make(chan struct{})}
	o.mu.Lock()
	o.sessions[s.id] = l
	o.mu.Unlock()
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		defer close(l.done)
		defer cancel()
		if err := s.run(ctx, reason); err != nil {
			s.log.Error("session stopped", "err", err)
		}
		o.mu.Lock()
		if o.sessions[s.id] == l {
			delete(o.sessions, s.id)
		}
		o.mu.Unlock()
	}()
}
