package pool

import (
	"context"
	"sync/atomic"

	"github.com/baton-rt/baton/handoff"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/eventlog"
	"github.com/baton-rt/baton/runtime/jsport"
	"github.com/baton-rt/baton/runtime/session"
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
		Inbox:   jsport.Inbox{JS: cfg.JS, Names: cfg.Names},
		Blobs:   o.out.blobs,
		Timers:  cfg.timers(),
		Backlog: o.backlog,
		Process: process{lease: o.lease, reg: o.reg, reconn: o.reconn, gate: o.gate, store: cfg.Store,
			id: cfg.ProcessID, draining: &o.draining},
		Handoffs:  handoffs{o.txn},
		Tasks:     o.tasks,
		Sends:     o.send,
		Agents:    o.agents,
		Observer:  o.metrics,
		Appender:  func(id string) session.Appender { return o.out.appender(id).WithBatches(o.batches.Load()) },
		Live:      cfg.live(o.metrics),
		Journal:   jsport.Journal{Open: o.journal.Load},
		Inventory: jsport.Inventory{Open: o.inv.Load},
		Index:     indexPort{o.index.Load}, AgentName: cfg.agentName(),
		Agent: cfg.Agent, Checker: runtime.NewChecker(cfg.Events, cfg.Agent.EventKinds()),
		Log: o.log, Now: cfg.Now, Deployment: cfg.Deployment,
		TickInterval: cfg.TickInterval, TriggerWait: cfg.TriggerWait, StepTimeout: cfg.StepTimeout, HibernateAfter: cfg.HibernateAfter,
		EndIdleAfter:     cfg.EndIdleAfter,
		ChildSendTimeout: cfg.ChildSendTimeout,
		Limits: runtime.Limits{MaxStepsPerTurn: cfg.MaxStepsPerTurn, MaxTokensPerTurn: cfg.MaxTokensPerTurn,
			MaxTokensPerSession: cfg.MaxTokensPerSession},
		StepRetry: cfg.StepRetry, MaxDebounce: cfg.MaxDebounce,
		Failpoints: cfg.Failpoints,
	}
	if err := env.Ready(); err != nil {
		return err
	}
	o.env = env
	return nil
}

// indexPort is session.Index over the index Run opens (before it, a
// write is dropped: the reconciler heals it).
type indexPort struct{ open func() *kv.Index }

func (p indexPort) Write(ctx context.Context, e record.IndexEntry) error {
	if x := p.open(); x != nil {
		return x.Write(ctx, e)
	}
	return nil
}

// The JetStream ports the owner's parts share with the sessions.

func (c *Config) timers() jsport.Timers {
	return jsport.Timers{JS: c.JS, Names: c.Names, Deployment: c.Deployment, Now: c.Now}
}

func (c *Config) live(m *metrics) jsport.Live {
	return jsport.Live{NC: c.NC, Names: c.Names, Count: func(outcome string) { m.live.WithLabelValues(outcome).Inc() }}
}

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
