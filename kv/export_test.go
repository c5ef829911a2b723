package kv

import (
	"context"

	"github.com/baton-rt/baton/subjects"
)

// AddPostings writes postings as Put does (tests: a stale posting).
func (x *Index) AddPostings(ctx context.Context, ps []subjects.Posting) error {
	return x.addPostings(ctx, ps)
}
