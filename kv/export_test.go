package kv

import (
	"context"

	"github.com/baton-rt/baton/subjects"
)

// AddPostings writes postings as Put does (tests: a stale posting).
func (x *Index) AddPostings(ctx context.Context, ps []subjects.Posting) error {
	return x.addPostings(ctx, ps)
}

// StartCursor is a cursor before every posting of q's walk, reading the
// postings all at once (whole) or an hour at a time.
func StartCursor(q IndexQuery, whole bool) string {
	c := hourStart("00000000")
	c.whole = whole
	return q.encodeCursor(c)
}
