package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go/jetstream"
)

// Deployment is the value of baton_owners/deploy.<deploymentID>. An operator
// retires a deployment explicitly; its sessions without a live owner are then
// adopted elsewhere (docs/handoff.md).
//
// WireVersions and StateVersions are what the deployment's owners read:
// the inbox wire versions and the checkpoint state versions, ascending.
// Owners advertise them at start (AdvertiseDeployment); a record without
// them was written by an older build or only by an operator's retirement.
type Deployment struct {
	ID            string    `json:"id"`
	Retired       bool      `json:"retired"`
	RetiredAt     time.Time `json:"retiredAt,omitzero"`
	UpdatedAt     time.Time `json:"updatedAt"`
	WireVersions  []int     `json:"wireVersions,omitempty"`
	StateVersions []int     `json:"stateVersions,omitempty"`
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
// existing record is an *record.OwnedError), otherwise a CAS at rev.
func (s *Store) PutDeployment(ctx context.Context, d Deployment, rev uint64) (uint64, error) {
	key, data, err := s.encodeDeployment(d)
	if err != nil {
		return 0, err
	}
	if rev == 0 {
		return s.claim(ctx, s.owners, key, s.owners.kvWrite(key, data), func(entry) *record.OwnedError { return nil })
	}
	return s.update(ctx, s.owners, key, data, rev)
}

// RetireDeployment marks deployment id retired in baton_owners and returns
// the stored record, and whether this call changed it. It is idempotent:
// retiring a retired deployment changes nothing and returns the record of
// the first retirement (its RetiredAt). A deployment without a record gets
// one, created retired (create-only); an existing record is updated by a
// revision CAS on a leader read. A lost CAS (a concurrent retire or write)
// re-reads and decides again.
func (s *Store) RetireDeployment(ctx context.Context, id string) (Deployment, bool, error) {
	if err := subjects.ValidateDeployment(id); err != nil {
		return Deployment{}, false, invalid("%w", err)
	}
	key := subjects.DeploymentKey(id)
	type result struct {
		d       Deployment
		changed bool
	}
	r, err := retry(ctx, func() (result, error) {
		d, changed, err := s.retireOnce(ctx, id, key)
		return result{d, changed}, err
	})
	return r.d, r.changed, err
}

// retireOnce is one round of the loop; only a lost CAS is retried.
func (s *Store) retireOnce(ctx context.Context, id, key string) (Deployment, bool, error) {
	now := s.now()
	e, err := s.leaderLast(ctx, s.owners, key)
	if errors.Is(err, record.ErrNotFound) || err == nil && !e.live() { // no record, or a deleted one
		d := Deployment{ID: id, Retired: true, RetiredAt: now, UpdatedAt: now}
		_, data, err := s.encodeDeployment(d)
		if err != nil {
			return Deployment{}, false, backoff.Permanent(err)
		}
		_, err = s.claim(ctx, s.owners, key, s.owners.kvWrite(key, data), func(entry) *record.OwnedError { return nil })
		if errors.Is(err, record.ErrConflict) {
			return Deployment{}, false, err // created meanwhile: read it and decide again
		}
		if err != nil {
			return Deployment{}, false, backoff.Permanent(err)
		}
		return d, true, nil
	}
	if err != nil {
		return Deployment{}, false, backoff.Permanent(err)
	}
	var d Deployment
	if err := decode(e, &d); err != nil {
		return Deployment{}, false, backoff.Permanent(err)
	}
	if d.Retired {
		return d, false, nil
	}
	d.Retired, d.RetiredAt, d.UpdatedAt = true, now, now
	_, data, err := s.encodeDeployment(d)
	if err != nil {
		return Deployment{}, false, backoff.Permanent(err)
	}
	_, err = s.update(ctx, s.owners, key, data, e.rev)
	if errors.Is(err, record.ErrConflict) {
		return Deployment{}, false, err
	}
	if err != nil {
		return Deployment{}, false, backoff.Permanent(err)
	}
	return d, true, nil
}

// DeploymentRetired reports whether deployment id is retired, by a leader
// read (an operator decision such as a forced move rests on it). A
// deployment without a record is not retired.
func (s *Store) DeploymentRetired(ctx context.Context, id string) (bool, error) {
	if err := subjects.ValidateDeployment(id); err != nil {
		return false, invalid("%w", err)
	}
	e, err := s.leaderLast(ctx, s.owners, subjects.DeploymentKey(id))
	if errors.Is(err, record.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var d Deployment
	if err := decode(e, &d); err != nil {
		if errors.Is(err, record.ErrNotFound) { // a deleted record
			return false, nil
		}
		return false, err
	}
	return d.Retired, nil
}

// RetiredDeployments returns the IDs of the retired deployments, sorted (a
// watch over the deploy.* keys, like ListDeployments).
func (s *Store) RetiredDeployments(ctx context.Context) ([]string, error) {
	all, err := s.ListDeployments(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, d := range all {
		if d.Retired {
			ids = append(ids, d.ID)
		}
	}
	return ids, nil
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
