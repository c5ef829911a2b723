package kv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/cenkalti/backoff/v4"
)

// Agents and promotion (docs/runtime.md R10). A deployment belongs to one
// agent, said by baton_owners/agent.<deploymentID>: written once,
// create-only, by the deployment's first owner or ingress, never changed.
// The key is new: no build before agents writes it, so an older build that
// re-encodes the deployment record (deploy.<id>) cannot drop it; a
// deployment without one belongs to subjects.DefaultAgent. An agent's
// promoted deployment is baton_owners/promote.<agent>, written by the
// admin promote route by a revision CAS.

// DeploymentAgent is the value of baton_owners/agent.<deploymentID>.
type DeploymentAgent struct {
	DeploymentID string    `json:"deploymentId"`
	Agent        string    `json:"agent"`
	At           time.Time `json:"at"`
}

// Promotion is the value of baton_owners/promote.<agent>: the deployment
// every ingress of the agent stamps, and the one promoted before it.
type Promotion struct {
	Agent        string    `json:"agent"`
	DeploymentID string    `json:"deploymentId"`
	Previous     string    `json:"previous,omitempty"`
	PromotedAt   time.Time `json:"promotedAt"`
}

// RegisterAgent records that deployment dep belongs to agent (create-only).
// Registering the agent it already has is a no-op; another agent is an
// *AgentMismatchError (errors.Is ErrAgentMismatch): a deployment never
// changes agents.
func (s *Store) RegisterAgent(ctx context.Context, dep, agent string) error {
	if err := subjects.ValidateDeployment(dep); err != nil {
		return invalid("%w", err)
	}
	if err := subjects.ValidateAgent(agent); err != nil {
		return invalid("%w", err)
	}
	key := subjects.AgentKey(dep)
	data, err := s.owners.encode(key, DeploymentAgent{DeploymentID: dep, Agent: agent, At: s.now()})
	if err != nil {
		return err
	}
	_, err = s.claim(ctx, s.owners, key, s.owners.kvWrite(key, data), func(entry) *record.OwnedError { return nil })
	var owned *record.OwnedError
	if !errors.As(err, &owned) {
		return err
	}
	have, err := s.AgentOf(ctx, dep)
	if err != nil {
		return err
	}
	if have != agent {
		return &AgentMismatchError{DeploymentID: dep, Agent: have, Want: agent}
	}
	return nil
}

// AgentOf returns the agent deployment dep belongs to, by a leader read:
// subjects.DefaultAgent when it has no agent key.
func (s *Store) AgentOf(ctx context.Context, dep string) (string, error) {
	if err := subjects.ValidateDeployment(dep); err != nil {
		return "", invalid("%w", err)
	}
	e, err := s.leaderLast(ctx, s.owners, subjects.AgentKey(dep))
	if errors.Is(err, record.ErrNotFound) || err == nil && !e.live() {
		return subjects.DefaultAgent, nil
	}
	if err != nil {
		return "", err
	}
	var a DeploymentAgent
	if err := decode(e, &a); err != nil {
		return "", err
	}
	return a.Agent, nil
}

// Promote makes dep agent's promoted deployment by a revision CAS on a
// leader read, and returns the stored promotion and its revision.
// Promoting the deployment already promoted changes nothing and returns
// the stored record. The caller checks that dep belongs to agent and is
// not retired.
func (s *Store) Promote(ctx context.Context, agent, dep string) (Promotion, uint64, error) {
	if err := subjects.ValidateAgent(agent); err != nil {
		return Promotion{}, 0, invalid("%w", err)
	}
	if err := subjects.ValidateDeployment(dep); err != nil {
		return Promotion{}, 0, invalid("%w", err)
	}
	key := subjects.PromotionKey(agent)
	type result struct {
		p   Promotion
		rev uint64
	}
	r, err := retry(ctx, func() (result, error) {
		cur, rev, err := s.leaderPromotion(ctx, key)
		if err != nil {
			return result{}, backoff.Permanent(err)
		}
		if rev != 0 && cur.DeploymentID == dep {
			return result{cur, rev}, nil
		}
		p := Promotion{Agent: agent, DeploymentID: dep, Previous: cur.DeploymentID, PromotedAt: s.now()}
		data, err := s.owners.encode(key, p)
		if err != nil {
			return result{}, backoff.Permanent(err)
		}
		if rev == 0 {
			rev, err = s.claim(ctx, s.owners, key, s.owners.kvWrite(key, data), func(entry) *record.OwnedError { return nil })
			var owned *record.OwnedError
			if errors.As(err, &owned) {
				err = fmt.Errorf("%w: promote %s: created meanwhile", record.ErrConflict, agent)
			}
		} else {
			rev, err = s.update(ctx, s.owners, key, data, rev)
		}
		switch {
		case errors.Is(err, record.ErrConflict):
			return result{}, err // decide again on a fresh read
		case err != nil:
			return result{}, backoff.Permanent(err)
		}
		return result{p, rev}, nil
	})
	return r.p, r.rev, err
}

// Promoted returns agent's promotion and its revision by a leader read;
// revision 0 when none was ever promoted.
func (s *Store) Promoted(ctx context.Context, agent string) (Promotion, uint64, error) {
	if err := subjects.ValidateAgent(agent); err != nil {
		return Promotion{}, 0, invalid("%w", err)
	}
	return s.leaderPromotion(ctx, subjects.PromotionKey(agent))
}

func (s *Store) leaderPromotion(ctx context.Context, key string) (Promotion, uint64, error) {
	e, err := s.leaderLast(ctx, s.owners, key)
	switch {
	case errors.Is(err, record.ErrNotFound), err == nil && !e.live():
		return Promotion{}, 0, nil
	case err != nil:
		return Promotion{}, 0, err
	}
	var p Promotion
	if err := decode(e, &p); err != nil {
		return Promotion{}, 0, err
	}
	return p, e.rev, nil
}

// UnretireDeployment clears deployment id's retirement by a revision CAS on
// a leader read, keeping every other member, and returns the stored record
// and whether this call changed it. A deployment that is not retired (or
// has no record) is left alone.
func (s *Store) UnretireDeployment(ctx context.Context, id string) (Deployment, bool, error) {
	if err := subjects.ValidateDeployment(id); err != nil {
		return Deployment{}, false, invalid("%w", err)
	}
	key := subjects.DeploymentKey(id)
	type result struct {
		d       Deployment
		changed bool
	}
	r, err := retry(ctx, func() (result, error) {
		d, rev, err := s.leaderDeployment(ctx, id, key)
		if err != nil {
			return result{}, backoff.Permanent(err)
		}
		if rev == 0 || !d.Retired {
			return result{d, false}, nil
		}
		d.Retired, d.RetiredAt, d.UpdatedAt = false, time.Time{}, s.now()
		_, data, err := s.encodeDeployment(d)
		if err != nil {
			return result{}, backoff.Permanent(err)
		}
		if _, err = s.update(ctx, s.owners, key, data, rev); err != nil {
			if errors.Is(err, record.ErrConflict) {
				return result{}, err
			}
			return result{}, backoff.Permanent(err)
		}
		return result{d, true}, nil
	})
	return r.d, r.changed, err
}
