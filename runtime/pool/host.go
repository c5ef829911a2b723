package pool

import (
	"context"
	"errors"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/eventlog"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
)

// The owner process's side of its sessions: the session.Env every session
// shares, and the session.Host through which a session reaches the
// process (its lease, its handoff transaction, tasks, its index).

// newEnv builds the sessions' environment over JetStream: kv for records
// and event appends, the inbox stream's consumers, the state object store
// (bound when Run opens it), message schedules for timers.
func (o *Owner) newEnv() error {
	cfg := o.cfg
	env := &session.Env{
		Records:  cfg.Store,
		Inbox:    jsInbox{js: cfg.JS, names: cfg.Names},
		Blobs:    jsBlobs{obs: func() objectStore { return o.state }},
		Timers:   jsTimers{js: cfg.JS, names: cfg.Names, deployment: cfg.Deployment, now: cfg.Now},
		Backlog:  o.backlog,
		Host:     host{o},
		Observer: o.metrics,
		Appender: func(id string) session.Appender { return o.appender(id) },
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

// host is session.Host for the sessions of o.
type host struct{ o *Owner }

var (
	_ session.Host     = host{}
	_ session.Records  = (*kv.Store)(nil)
	_ session.Appender = (*eventlog.Appender)(nil)
)

func (h host) LeaseValid() bool { return h.o.lease.valid() }

func (h host) AwaitLease(ctx context.Context) error { return h.o.lease.await(ctx) }

func (h host) Handoff(ctx context.Context, req handoff.Request) (handoff.Result, error) {
	if h.o.txn == nil {
		return handoff.Result{}, session.ErrHandoffDisabled
	}
	return h.o.txn.Run(ctx, req)
}

func (h host) StartTask(ctx context.Context, sessionID string, t runtime.TaskSpec) error {
	return h.o.startTask(ctx, sessionID, t)
}

func (h host) RemoveIndex(ctx context.Context, sessionID string) error {
	return h.o.cfg.Store.RemoveIndex(ctx, h.o.cfg.ProcessID, sessionID)
}

func (h host) Go(f func(ctx context.Context)) {
	ctx := h.o.reg.serving()
	h.o.reg.goBG(ctx, func() { f(ctx) })
}

func (h host) Reconnected() <-chan struct{} { return h.o.reconn.next() }

func (h host) Draining() bool { return h.o.draining.Load() }

func (h host) Settled(sessionID string) { h.o.gate.dropSuspect(sessionID) }
