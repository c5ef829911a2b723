package owner

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/remote"
)

// RemoteConfig configures RemoteAgent; a zero member is its default.
type RemoteConfig struct {
	// EventKinds are the event kinds the workers emit besides
	// message.output (--agent-event-kinds, comma-separated).
	EventKinds []string
	// UnavailableAfter is how long a step nobody answers is asked again
	// (with backoff) before it fails with agent_unavailable
	// (--agent-unavailable-after; default 30s).
	UnavailableAfter time.Duration
	// HeartbeatInterval is how often a worker must signal a running step
	// (--agent-heartbeat-interval; default 1s); HeartbeatTimeout how long
	// the owner waits without a word from the step's worker before the
	// step fails with agent_timeout (--agent-heartbeat-timeout; default
	// 5s; at least twice the interval).
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// InlineBytes bounds the history a step request carries inline; a
	// longer one is paged by the worker from baton.agent.<deployment>.history
	// (--agent-inline-bytes; default 256 KiB).
	InlineBytes int
}

// RemoteAgent is the agent of an owner that runs no agent code: Run sends
// every step to the workers of its deployment over NATS — any process in
// any language subscribed to baton.agent.<deployment>.step in a queue
// group — and keeps everything durable itself. The worker's side (the
// subjects, the JSON shapes, one step's lifecycle) is in docs/agent.md,
// "Writing an agent in another language". bin/owner --agent nats runs
// one.
//
// The returned agent only works under Run (or Main), which connects it;
// called otherwise, its steps fail.
func RemoteAgent(cfg RemoteConfig) runtime.Agent {
	return &remoteAgent{cfg: cfg}
}

// remoteAgent is RemoteAgent's: Run replaces it by the connected
// remote.Agent (bind).
type remoteAgent struct {
	cfg   RemoteConfig
	bound atomic.Pointer[remote.Agent]
}

func (r *remoteAgent) EventKinds() []string { return slices.Clone(r.cfg.EventKinds) }

func (r *remoteAgent) Step(ctx context.Context, in runtime.StepInput) (runtime.StepResult, error) {
	if a := r.bound.Load(); a != nil {
		return a.Step(ctx, in)
	}
	return runtime.StepResult{}, errors.New("owner.RemoteAgent: the agent is not running under owner.Run")
}

// check refuses values remote.New would.
func (c RemoteConfig) check() error {
	switch {
	case c.UnavailableAfter < 0:
		return fmt.Errorf("--agent-unavailable-after %v: not negative", c.UnavailableAfter)
	case c.HeartbeatInterval < 0 || c.HeartbeatTimeout < 0 || c.InlineBytes < 0:
		return errors.New("--agent-heartbeat-interval, --agent-heartbeat-timeout, --agent-inline-bytes: not negative")
	}
	interval, timeout := cmp.Or(c.HeartbeatInterval, remote.DefaultHeartbeatInterval), cmp.Or(c.HeartbeatTimeout, remote.DefaultHeartbeatTimeout)
	if timeout < 2*interval {
		return fmt.Errorf("--agent-heartbeat-timeout %v: at least twice --agent-heartbeat-interval (%v)", timeout, interval)
	}
	for _, k := range c.EventKinds {
		if k == "" || runtime.Reserved(k) {
			return fmt.Errorf("--agent-event-kinds: %q is empty or a reserved kind", k)
		}
	}
	return nil
}

// agentFlags are the flags of the agent's mode: --agent and the remote
// agent's settings.
type agentFlags struct {
	mode   string // "builtin" or "nats"
	remote RemoteConfig
	kinds  string
}

// Agent modes (--agent).
const (
	agentBuiltin = "builtin"
	agentNATS    = "nats"
)

func (f *agentFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.mode, "agent", agentBuiltin, "where steps run: builtin (this binary's agent) or nats (workers of the deployment over NATS, on baton.agent.<deployment>.step; docs/agent.md)")
	fs.StringVar(&f.kinds, "agent-event-kinds", "", "--agent nats: event kinds the workers emit besides message.output, comma-separated")
	fs.DurationVar(&f.remote.UnavailableAfter, "agent-unavailable-after", remote.DefaultUnavailableAfter, "--agent nats: a step no worker answers is asked again with backoff for this long, then fails with agent_unavailable")
	fs.DurationVar(&f.remote.HeartbeatInterval, "agent-heartbeat-interval", remote.DefaultHeartbeatInterval, "--agent nats: how often a worker must signal a running step")
	fs.DurationVar(&f.remote.HeartbeatTimeout, "agent-heartbeat-timeout", remote.DefaultHeartbeatTimeout, "--agent nats: a step whose worker sends nothing for this long fails with agent_timeout (at least twice the interval)")
	fs.IntVar(&f.remote.InlineBytes, "agent-inline-bytes", remote.DefaultInlineBytes, "--agent nats: most history bytes a step request carries inline; a longer history is paged by the worker")
}

// check checks the mode and the remote agent's settings.
func (f *agentFlags) check() error {
	switch f.mode {
	case agentBuiltin:
		return nil
	case agentNATS:
		if f.kinds != "" {
			f.remote.EventKinds = strings.Split(f.kinds, ",")
		}
		return f.remote.check()
	}
	return fmt.Errorf("--agent %q: want builtin or nats", f.mode)
}

// agent is the agent a run uses: the binary's, or a remote one.
func (f agentFlags) agent(builtin runtime.Agent) runtime.Agent {
	if f.mode == agentNATS {
		return RemoteAgent(f.remote)
	}
	return builtin
}
