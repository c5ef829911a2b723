package pool

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/subjects"
	"github.com/cenkalti/backoff/v4"
)

// agents is this process's agent in the fleet (docs/runtime.md R10): it
// registers the deployment's agent and refuses a retired deployment at
// start, follows the fleet (kv.Fleet), tells a session whether a handoff
// trigger's deployment belongs to this agent (session.Agents), and tells
// the adoption which deployments this one may take sessions from.
type agents struct {
	cfg   *Config
	fleet atomic.Pointer[kv.Fleet]
}

// enroll registers this deployment's agent (create-only; another agent is
// an error) and refuses to start for a retired deployment: an owner of a
// retired deployment would take its sessions back and create new ones.
func (a *agents) enroll(ctx context.Context) error {
	dep, name := a.cfg.Deployment, a.cfg.agentName()
	if err := a.cfg.Store.RegisterAgent(ctx, dep, name); err != nil {
		return fmt.Errorf("pool: agent: %w", err)
	}
	retired, err := a.cfg.Store.DeploymentRetired(ctx, dep)
	if err != nil {
		return fmt.Errorf("pool: read deployment %s: %w", dep, err)
	}
	if retired {
		return &RetiredError{DeploymentID: dep}
	}
	return nil
}

// follow starts the fleet view; it lives until ctx ends. Until it has
// loaded, SameAgent reads the leader.
func (a *agents) follow(ctx context.Context, log func(string, ...any)) error {
	f, err := a.cfg.Store.WatchFleet(ctx, log)
	if err != nil {
		return fmt.Errorf("pool: fleet watch: %w", err)
	}
	go func() {
		select {
		case <-f.Loaded():
			a.fleet.Store(f)
		case <-ctx.Done():
		}
	}()
	return nil
}

// SameAgent reports whether deployment dep belongs to this process's agent
// (session.Agents). A read that fails is tried again, with backoff, until
// ctx ends: a trigger is never applied on a guess.
func (a *agents) SameAgent(ctx context.Context, dep string) (bool, error) {
	if dep == a.cfg.Deployment {
		return true, nil
	}
	name, err := backoff.RetryWithData(func() (string, error) {
		if f := a.fleet.Load(); f != nil {
			return f.Agent(ctx, dep)
		}
		return a.cfg.Store.AgentOf(ctx, dep)
	}, backoff.WithContext(backoff.NewExponentialBackOff(backoff.WithMaxInterval(time.Second), backoff.WithMaxElapsedTime(0)), ctx))
	if err != nil {
		return false, err
	}
	return name == a.cfg.agentName(), nil
}

// promotedHere reports whether this deployment is its agent's promoted
// one and deployment dep, of the same agent, has no live owner process:
// then this deployment adopts dep's sessions at their next message, as it
// would a retired deployment's (docs/handoff.md, "Promotion").
func (a *agents) promotedHere(dep string) bool {
	f := a.fleet.Load()
	if f == nil {
		return false
	}
	p, _, ok := f.Promoted(a.cfg.agentName())
	return ok && p == a.cfg.Deployment && dep != p && f.LiveOwners(dep) == 0
}

// sameAgentKnown is SameAgent without a read: what the fleet view knows
// (false until it has loaded).
func (a *agents) sameAgentKnown(dep string) bool {
	f := a.fleet.Load()
	return f != nil && f.KnownAgent(dep) == a.cfg.agentName()
}

// agentName is the agent of this process's deployment.
func (c *Config) agentName() string {
	if c.AgentName == "" {
		return subjects.DefaultAgent
	}
	return c.AgentName
}

// RetiredError refuses to start an owner of a retired deployment.
type RetiredError struct{ DeploymentID string }

func (e *RetiredError) Error() string {
	return fmt.Sprintf("deployment %s is retired: an owner of it would take its sessions back; un-retire it first with POST /v1/admin/deployments/%s/unretire, or start another deployment",
		e.DeploymentID, e.DeploymentID)
}

// Is matches ErrRetired.
func (e *RetiredError) Is(target error) bool { return target == ErrRetired }

// ErrRetired is matched by a *RetiredError.
var ErrRetired = errors.New("pool: deployment retired")
