package pool

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/eventlog"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
)

// The owner process's side of its sessions: the session.Env every session
// shares, and the ports through which a session reaches the process
// (session.Process, Handoffs, Tasks, Sends).

// newEnv builds the sessions' environment over JetStream: kv for records
// and event appends, the inbox stream's consumers, the state object store
// (bound when Run opens it), message schedules for timers.
func (o *Owner) newEnv() error {
	cfg := o.cfg
	env := &session.Env{
		Records: cfg.Store,
		Inbox:   jsInbox{js: cfg.JS, names: cfg.Names},
		Blobs:   jsBlobs{obs: func() objectStore { return o.state }},
		Timers:  jsTimers{js: cfg.JS, names: cfg.Names, deployment: cfg.Deployment, now: cfg.Now},
		Backlog: o.backlog,
		Process: process{lease: o.lease, reg: o.reg, reconn: o.reconn, gate: o.gate, store: cfg.Store,
			id: cfg.ProcessID, draining: &o.draining},
		Handoffs: handoffs{o.txn},
		Tasks:    o.tasks,
		Sends:    o.send,
		Observer: o.metrics,
		Appender: func(id string) session.Appender { return o.out.appender(id) },
		Live:     natsLive{nc: cfg.NC, names: cfg.Names, met: o.metrics},
		Journal:  lazyJournal{o},
		Agent:    cfg.Agent, Checker: runtime.NewChecker(cfg.Events, cfg.Agent.EventKinds()),
		Log: o.log, Now: cfg.Now, Deployment: cfg.Deployment,
		TickInterval: cfg.TickInterval, StepTimeout: cfg.StepTimeout, HibernateAfter: cfg.HibernateAfter,
		ChildSendTimeout: cfg.ChildSendTimeout,
		Limits: runtime.Limits{MaxStepsPerTurn: cfg.MaxStepsPerTurn, MaxTokensPerTurn: cfg.MaxTokensPerTurn,
			MaxTokensPerSession: cfg.MaxTokensPerSession},
		Failpoints: cfg.Failpoints,
	}
	if err := env.Ready(); err != nil {
		return err
	}
	o.env = env
	return nil
}

// natsLive is session.Live on core NATS: a session's live events on its
// live subject (baton.live.<sessionID>), not stored by any stream.
// nats.Conn.Publish buffers; the session's streamer calls it from its own
// goroutine, so a slow connection delays only the deltas.
type natsLive struct {
	nc    *nats.Conn
	names subjects.Names
	met   *metrics
}

func (l natsLive) Publish(sessionID string, msg []byte) {
	if err := l.nc.Publish(l.names.Live(sessionID), msg); err != nil {
		l.met.live.WithLabelValues("failed").Inc()
		return
	}
	l.met.live.WithLabelValues("published").Inc()
}

// lazyJournal is session.JournalStore over the journal bucket Run opens.
type lazyJournal struct{ o *Owner }

func (l lazyJournal) store() (*kv.Journal, error) {
	if j := l.o.journal.Load(); j != nil {
		return j, nil
	}
	return nil, errors.New("pool: the journal bucket is not open yet")
}

func (l lazyJournal) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	j, err := l.store()
	if err != nil {
		return nil, 0, err
	}
	return j.Get(ctx, key)
}

func (l lazyJournal) Create(ctx context.Context, key string, data []byte) (uint64, error) {
	j, err := l.store()
	if err != nil {
		return 0, err
	}
	return j.Create(ctx, key, data)
}

func (l lazyJournal) Update(ctx context.Context, key string, data []byte, rev uint64) (uint64, error) {
	j, err := l.store()
	if err != nil {
		return 0, err
	}
	return j.Update(ctx, key, data, rev)
}

func (l lazyJournal) Delete(ctx context.Context, key string) error {
	j, err := l.store()
	if err != nil {
		return err
	}
	return j.Delete(ctx, key)
}

var _ session.JournalStore = (*kv.Journal)(nil)

// process is session.Process for the sessions of one owner process: its
// lease, registry, reconnect signal, quarantine gate and index.
type process struct {
	lease    *lease
	reg      *registry
	reconn   *reconnects
	gate     *gate
	store    *kv.Store
	id       string // the process ID, whose index this is
	draining *atomic.Bool
}

// handoffs is session.Handoffs: the handoff transaction, nil when the
// process does not hand off.
type handoffs struct{ txn *handoff.Txn }

var (
	_ session.Process  = process{}
	_ session.Handoffs = handoffs{}
	_ session.Tasks    = (*tasks)(nil)
	_ session.Sends    = (*sender)(nil)
	_ session.Records  = (*kv.Store)(nil)
	_ session.Appender = (*eventlog.Appender)(nil)
)

func (p process) LeaseValid() bool { return p.lease.valid() }

func (p process) AwaitLease(ctx context.Context) error { return p.lease.await(ctx) }

func (h handoffs) Handoff(ctx context.Context, req handoff.Request) (handoff.Result, error) {
	if h.txn == nil {
		return handoff.Result{}, session.ErrHandoffDisabled
	}
	return h.txn.Run(ctx, req)
}

func (p process) RemoveIndex(ctx context.Context, sessionID string) error {
	return p.store.RemoveIndex(ctx, p.id, sessionID)
}

func (p process) Go(f func(ctx context.Context)) {
	ctx := p.reg.serving()
	p.reg.goBG(ctx, func() { f(ctx) })
}

func (p process) Reconnected() <-chan struct{} { return p.reconn.next() }

func (p process) Draining() bool { return p.draining.Load() }

func (p process) Settled(sessionID string) { p.gate.dropSuspect(sessionID) }
