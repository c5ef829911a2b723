package jsport

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-rt/baton/runtime/session"
	"github.com/nats-io/nats.go/jetstream"
)

// ObjectStore is the part of a jetstream.ObjectStore Blobs uses.
type ObjectStore interface {
	PutBytes(ctx context.Context, name string, data []byte) (*jetstream.ObjectInfo, error)
	GetBytes(ctx context.Context, name string, opts ...jetstream.GetObjectOpt) ([]byte, error)
	GetInfo(ctx context.Context, name string, opts ...jetstream.GetObjectInfoOpt) (*jetstream.ObjectInfo, error)
	Delete(ctx context.Context, name string) error
}

// Blobs is session.Blobs on the baton_state object store, which Run
// opens (obs returns it; nil before).
type Blobs struct {
	// Store returns the object store, nil until it is open.
	Store func() ObjectStore
}

func (b Blobs) store() (ObjectStore, error) {
	obs := b.Store()
	if obs == nil {
		return nil, ErrNotOpen
	}
	return obs, nil
}

// Put stores data under name, sending it again across an election of the
// object store's stream (attempts): the content is addressed by its
// digest, so a second put of a name writes the same object.
func (b Blobs) Put(ctx context.Context, name string, data []byte) error {
	obs, err := b.store()
	if err != nil {
		return err
	}
	return attempts(ctx, func(actx context.Context) error {
		_, err := obs.PutBytes(actx, name, data)
		return err
	})
}

func (b Blobs) Has(ctx context.Context, name string) (bool, error) {
	obs, err := b.store()
	if err != nil {
		return false, err
	}
	_, err = obs.GetInfo(ctx, name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return false, nil
	}
	return false, err
}

func (b Blobs) Get(ctx context.Context, name string) ([]byte, error) {
	obs, err := b.store()
	if err != nil {
		return nil, err
	}
	data, err := obs.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %s: %w", session.ErrBlobNotFound, name, err)
	}
	return data, err
}

func (b Blobs) Delete(ctx context.Context, name string) error {
	obs, err := b.store()
	if err != nil {
		return nil // nothing was stored
	}
	if err := obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return err
	}
	return nil
}

var _ session.Blobs = Blobs{}
