package kv

import (
	"context"

	"github.com/baton-rt/baton/subjects"
)

// AddPostings writes postings as Put does (tests: a stale posting).
func (x *Index) AddPostings(ctx context.Context, ps []subjects.Posting) error {
	_, err := x.addPostings(ctx, ps)
	return err
}

// SetBeforeCAS sets a hook run between a Put attempt's postings and its
// entry's CAS (tests: a writer racing another).
func (x *Index) SetBeforeCAS(f func()) { x.beforeCAS = f }

// SetAfterCAS sets a hook run after a Put attempt's CAS landed; its error
// stands for the answer lost on the way back (tests: an uncertain write).
func (x *Index) SetAfterCAS(f func() error) { x.afterCAS = f }

// StartCursor is a cursor before every posting of q's walk, reading the
// postings all at once (whole) or an hour at a time.
func StartCursor(q IndexQuery, whole bool) string {
	c := hourStart("00000000")
	c.whole = whole
	return q.encodeCursor(c)
}

// AllKeys lists every key of the index's stream (tests).
func (x *Index) AllKeys(ctx context.Context) ([]string, error) { return x.keys(ctx, ">") }
