package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baton-rt/baton/subjects"
	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
)

// Deployment is the value of baton_owners/deploy.<deploymentID>. An operator
// retires a deployment explicitly; its sessions without a live owner are then
// adopted elsewhere (DESIGN.md §6).
type Deployment struct {
	ID        string    `json:"id"`
	Retired   bool      `json:"retired"`
	RetiredAt time.Time `json:"retiredAt,omitzero"`
	UpdatedAt time.Time `json:"updatedAt"`
}

func (s *Store) encodeDeployment(d Deployment) (string, []byte, error) {
	if err := subjects.ValidateDeployment(d.ID); err != nil {
		return "", nil, invalid("%w", err)
	}
	if d.UpdatedAt.IsZero() {
		d.UpdatedAt = s.now()
	}
	key := subjects.DeploymentKey(d.ID)
	data, err := s.owners.encode(key, d)
	return key, data, err
}

// GetDeployment reads a deployment record by direct get (a hint).
func (s *Store) GetDeployment(ctx context.Context, id string) (Deployment, uint64, error) {
	if err := subjects.ValidateDeployment(id); err != nil {
		return Deployment{}, 0, invalid("%w", err)
	}
	e, err := s.owners.get(ctx, subjects.DeploymentKey(id))
	if err != nil {
		return Deployment{}, 0, err
	}
	var d Deployment
	if err := decode(e, &d); err != nil {
		return Deployment{}, 0, err
	}
	return d, e.rev, nil
}

// PutDeployment writes a deployment record: rev 0 is create-only (an
// existing record is an *OwnedError), otherwise a CAS at rev.
func (s *Store) PutDeployment(ctx context.Context, d Deployment, rev uint64) (uint64, error) {
	key, data, err := s.encodeDeployment(d)
	if err != nil {
		return 0, err
	}
	if rev == 0 {
		return s.claim(ctx, s.owners, key, s.owners.kvWrite(key, data), func(entry) *OwnedError { return nil })
	}
	return s.owners.update(ctx, key, data, rev)
}

// RetireDeployment sets the retired flag by a CAS loop on leader reads.
// Retiring a retired deployment is a no-op; an unknown one is ErrNotFound.
func (s *Store) RetireDeployment(ctx context.Context, id string) error {
	if err := subjects.ValidateDeployment(id); err != nil {
		return invalid("%w", err)
	}
	key := subjects.DeploymentKey(id)
	_, err := retry(ctx, func() (struct{}, error) {
		return struct{}{}, s.retireOnce(ctx, key)
	})
	return err
}

// retireOnce is one round of the loop; only a lost CAS is retried.
func (s *Store) retireOnce(ctx context.Context, key string) error {
	e, err := s.leaderLastRetry(ctx, s.owners, key)
	if err != nil {
		return backoff.Permanent(err)
	}
	var d Deployment
	if err := decode(e, &d); err != nil || d.Retired {
		return backoff.Permanent(err)
	}
	now := s.now()
	d.Retired, d.RetiredAt, d.UpdatedAt = true, now, now
	_, data, err := s.encodeDeployment(d)
	if err != nil {
		return backoff.Permanent(err)
	}
	_, err = s.owners.update(ctx, key, data, e.rev)
	if errors.Is(err, ErrConflict) {
		return err
	}
	return backoff.Permanent(err)
}

// ListDeployments returns every deployment record, sorted by ID.
func (s *Store) ListDeployments(ctx context.Context) ([]Deployment, error) {
	w, err := s.owners.kv.Watch(ctx, subjects.DeploymentKeys(), jetstream.IgnoreDeletes())
	if err != nil {
		return nil, mapErr("watch", subjects.DeploymentKeys(), err)
	}
	defer stopWatch(w)
	var out []Deployment
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("kv: list deployments: watch closed early")
			}
			if e == nil { // end of the current state
				slices.SortFunc(out, func(a, b Deployment) int { return strings.Compare(a.ID, b.ID) })
				return out, nil
			}
			var d Deployment
			if err := json.Unmarshal(e.Value(), &d); err != nil {
				return nil, fmt.Errorf("kv: decode %s at revision %d: %w", e.Key(), e.Revision(), err)
			}
			out = append(out, d)
		}
	}
}
