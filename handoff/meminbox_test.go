package handoff_test

import (
	"context"
	"slices"
	"sync"
)

// memInbox is an in-memory inbox: sequences by token.
type memInbox struct {
	mu   sync.Mutex
	seq  uint64
	msgs map[string][]uint64
}

func newMemInbox() *memInbox { return &memInbox{msgs: map[string][]uint64{}} }

func (b *memInbox) publish(token string) uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	b.msgs[token] = append(b.msgs[token], b.seq)
	return b.seq
}

func (b *memInbox) holds(seq uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, seqs := range b.msgs {
		if slices.Contains(seqs, seq) {
			return true
		}
	}
	return false
}

func (b *memInbox) After(_ context.Context, tokens []string, seq uint64) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var first uint64
	for _, t := range tokens {
		for _, s := range b.msgs[t] {
			if s > seq && (first == 0 || s < first) {
				first = s
			}
		}
	}
	return first, nil
}
