package oldbuild

import "errors"

// Errors of Build, matched with errors.Is; the message names the commit.
var (
	// ErrMissingCommit: the commit is not in this clone (a shallow clone,
	// or a hash from another repository). Nothing is fetched.
	ErrMissingCommit = errors.New("oldbuild: commit not in this clone")
	// ErrNotAncestor: the commit is in the clone but not an ancestor of
	// HEAD, so it is no earlier build of this code.
	ErrNotAncestor = errors.New("oldbuild: commit is not an ancestor of HEAD")
)
