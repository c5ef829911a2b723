package kv

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/cenkalti/backoff/v4"
)

// AdvertiseDeployment records in deployment id's record the inbox wire
// versions and checkpoint state versions its owners read. It creates the
// record (create-only) when there is none, else updates it by a revision
// CAS on a leader read, keeping every other member as read: it never
// clears Retired or RetiredAt. A lost CAS (a concurrent retire or
// advertisement) re-reads and decides again. A record that already says
// the same versions is left alone.
func (s *Store) AdvertiseDeployment(ctx context.Context, id string, wireVersions, stateVersions []int) error {
	if err := subjects.ValidateDeployment(id); err != nil {
		return invalid("%w", err)
	}
	wv, sv := versionSet(wireVersions), versionSet(stateVersions)
	key := subjects.DeploymentKey(id)
	_, err := retry(ctx, func() (struct{}, error) {
		return struct{}{}, s.advertiseOnce(ctx, id, key, wv, sv)
	})
	return err
}

// advertiseOnce is one round of AdvertiseDeployment; only a lost CAS (or
// create race) is retried.
func (s *Store) advertiseOnce(ctx context.Context, id, key string, wv, sv []int) error {
	d, rev, err := s.leaderDeployment(ctx, id, key)
	if err != nil {
		return backoff.Permanent(err)
	}
	if rev != 0 && slices.Equal(d.WireVersions, wv) && slices.Equal(d.StateVersions, sv) {
		return nil
	}
	d.WireVersions, d.StateVersions, d.UpdatedAt = wv, sv, s.now()
	_, data, err := s.encodeDeployment(d)
	if err != nil {
		return backoff.Permanent(err)
	}
	if rev == 0 {
		_, err = s.claim(ctx, s.owners, key, s.owners.kvWrite(key, data), func(entry) *record.OwnedError { return nil })
	} else {
		_, err = s.update(ctx, s.owners, key, data, rev)
	}
	if err != nil && !errors.Is(err, record.ErrConflict) {
		return backoff.Permanent(err)
	}
	return err
}

// leaderDeployment reads deployment id's record from the stream leader;
// rev 0 (and a record of only its ID) when there is none, or a deleted one.
func (s *Store) leaderDeployment(ctx context.Context, id, key string) (Deployment, uint64, error) {
	e, err := s.leaderLast(ctx, s.owners, key)
	switch {
	case errors.Is(err, record.ErrNotFound), err == nil && !e.live():
		return Deployment{ID: id}, 0, nil
	case err != nil:
		return Deployment{}, 0, err
	}
	var d Deployment
	if err := decode(e, &d); err != nil {
		return Deployment{}, 0, err
	}
	return d, e.rev, nil
}

// DeploymentReads returns the inbox wire versions deployment id's owners
// advertised, by a leader read. A deployment without a record (or with a
// deleted one) is an error matching record.ErrNotFound; a record without
// versions (written by an older build, or only by a retirement) returns
// none and no error: its owners read version 1.
func (s *Store) DeploymentReads(ctx context.Context, id string) ([]int, error) {
	if err := subjects.ValidateDeployment(id); err != nil {
		return nil, invalid("%w", err)
	}
	key := subjects.DeploymentKey(id)
	d, rev, err := s.leaderDeployment(ctx, id, key)
	if err != nil {
		return nil, err
	}
	if rev == 0 {
		return nil, fmt.Errorf("%w: deployment %s has no record", record.ErrNotFound, id)
	}
	return d.WireVersions, nil
}

// versionSet is vs sorted, without repeats (nil for none).
func versionSet(vs []int) []int {
	if len(vs) == 0 {
		return nil
	}
	out := slices.Clone(vs)
	slices.Sort(out)
	return slices.Compact(out)
}
