package jsport

import (
	"context"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime/session"
)

// Journal is session.JournalStore over a journal bucket opened later (the
// owner opens baton_journal when it runs): Open returns it, nil until
// then, and every call before fails with ErrNotOpen.
type Journal struct {
	Open func() *kv.Journal
}

var (
	_ session.JournalStore = Journal{}
	_ session.JournalStore = (*kv.Journal)(nil)
)

func (l Journal) store() (*kv.Journal, error) {
	if j := l.Open(); j != nil {
		return j, nil
	}
	return nil, ErrNotOpen
}

// Get reads the entry at key.
func (l Journal) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	j, err := l.store()
	if err != nil {
		return nil, 0, err
	}
	return j.Get(ctx, key)
}

// Create writes the entry at key, if there is none.
func (l Journal) Create(ctx context.Context, key string, data []byte) (uint64, error) {
	j, err := l.store()
	if err != nil {
		return 0, err
	}
	return j.Create(ctx, key, data)
}

// Update writes the entry at key at revision rev.
func (l Journal) Update(ctx context.Context, key string, data []byte, rev uint64) (uint64, error) {
	j, err := l.store()
	if err != nil {
		return 0, err
	}
	return j.Update(ctx, key, data, rev)
}

// Delete deletes the entry at key.
func (l Journal) Delete(ctx context.Context, key string) error {
	j, err := l.store()
	if err != nil {
		return err
	}
	return j.Delete(ctx, key)
}
