package remote

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Config.
const (
	DefaultUnavailableAfter  = 30 * time.Second
	DefaultHeartbeatInterval = time.Second
	DefaultHeartbeatTimeout  = 5 * time.Second
	DefaultInlineBytes       = 256 << 10
)

// Config configures an Agent. NC, Names and Deployment are required; a
// zero duration or bound is its default.
type Config struct {
	// NC is the owner process's connection: requests go out on it.
	NC *nats.Conn
	// Names are the subjects' names (the deployment's prefix).
	Names subjects.Names
	// Deployment is the exact deployment the workers serve.
	Deployment string
	// EventKinds are the event kinds the workers emit besides
	// message.output (runtime.Agent.EventKinds).
	EventKinds []string
	// UnavailableAfter is how long a step request nobody answers is sent
	// again (with backoff) before the step fails with agent_unavailable:
	// long enough for a rolling restart of the workers.
	UnavailableAfter time.Duration
	// HeartbeatInterval is how often a worker is asked to send heartbeats
	// (the request's heartbeatMs).
	HeartbeatInterval time.Duration
	// HeartbeatTimeout is how long the owner waits without a message of a
	// step's worker before the step fails with agent_timeout. At least
	// twice HeartbeatInterval.
	HeartbeatTimeout time.Duration
	// InlineBytes bounds the history a request carries inline; a longer
	// one is sent by reference and paged (AgentHistoryRequest). Whatever
	// the bound, a request is made to fit the server's max_payload.
	InlineBytes int
	// Log receives the agent's log (nil: none).
	Log *slog.Logger
	// Registerer receives the agent's metrics (nil: none).
	Registerer prometheus.Registerer
}

// Agent is a runtime.Agent whose steps run on the deployment's workers.
// It is safe for concurrent use; Close it when its owner has stopped.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	hist    *nats.Subscription

	mu    sync.Mutex
	steps map[string]*step // running steps by token
}

// New returns an Agent of cfg and starts serving history pages on
// cfg.NC.
func New(cfg Config) (*Agent, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	a := &Agent{cfg: cfg, log: cfg.Log, steps: map[string]*step{}}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.log = a.log.With("agent", "nats")
	if a.metrics, err = newMetrics(cfg.Registerer); err != nil {
		return nil, err
	}
	a.hist, err = cfg.NC.Subscribe(cfg.Names.AgentHistory(cfg.Deployment), a.servePage)
	if err != nil {
		return nil, fmt.Errorf("remote: subscribe %s: %w", cfg.Names.AgentHistory(cfg.Deployment), err)
	}
	return a, nil
}

func (c Config) withDefaults() (Config, error) {
	if c.NC == nil || c.Deployment == "" {
		return c, fmt.Errorf("%w: NC and Deployment are required", ErrConfig)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.UnavailableAfter, DefaultUnavailableAfter)
	def(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	if c.InlineBytes == 0 {
		c.InlineBytes = DefaultInlineBytes
	}
	switch {
	case c.UnavailableAfter < 0 || c.HeartbeatInterval < time.Millisecond || c.InlineBytes < 0:
		return c, fmt.Errorf("%w: negative window, bound or heartbeat interval under 1ms", ErrConfig)
	case c.HeartbeatTimeout < 2*c.HeartbeatInterval:
		return c, fmt.Errorf("%w: heartbeat timeout %v is under twice the interval %v", ErrConfig, c.HeartbeatTimeout, c.HeartbeatInterval)
	}
	return c, nil
}

// Close stops serving history pages. Steps still running go on until
// their contexts end.
func (a *Agent) Close() { _ = a.hist.Unsubscribe() }

// EventKinds implements runtime.Agent.
func (a *Agent) EventKinds() []string { return slices.Clone(a.cfg.EventKinds) }

// Step implements runtime.Agent: it runs in on a worker. What goes wrong
// on the way is a failed step with its code (agent_unavailable,
// agent_timeout, result_invalid, agent_request_too_large); a cancelled ctx
// cancels the worker's step and returns ctx's error.
func (a *Agent) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	s, err := a.newStep(ctx, in, rand.Text()) // unguessable: a token is a step's address
	if err != nil {
		a.metrics.result(runtime.CodeAgentRequestTooLarge)
		return runtime.Failed(runtime.CodeAgentRequestTooLarge, err), nil
	}
	a.track(s)
	defer a.untrack(s)
	r, err := s.run()
	switch {
	case err != nil:
		a.metrics.result("cancelled")
	case r.Code != "":
		a.metrics.result(r.Code)
	default:
		a.metrics.result("ok")
	}
	return r, err
}

func (a *Agent) track(s *step) {
	a.mu.Lock()
	a.steps[s.token] = s
	a.mu.Unlock()
}

func (a *Agent) untrack(s *step) {
	a.mu.Lock()
	delete(a.steps, s.token)
	a.mu.Unlock()
	s.stop()
}

func (a *Agent) running(token string) *step {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.steps[token]
}
