package kv

import (
	"context"

	"github.com/baton-rt/baton/record"
)

// RequestFinish writes an operator's request to end or retry the
// quarantined session cur into its record (record.RequestFinish), by a CAS
// at cur's revision whose uncertain outcome is settled. It is the narrow
// intent API of the ingress, which writes no other part of a session's
// state (docs/architecture.md, "One writer"): an owner finishes the
// request. A record that already holds the same request is returned
// unwritten; a transition refusal (not quarantined, another request
// pending) wraps record.ErrTransition, a lost CAS is record.ErrConflict.
func (s *Store) RequestFinish(ctx context.Context, cur record.Session, f record.FinishRequest) (record.Session, error) {
	next, err := record.RequestFinish(cur.Record, f)
	if err != nil {
		return record.Session{}, err
	}
	if cur.Record.Finish != nil {
		return cur, nil
	}
	rev, err := s.UpdateSessionSettled(ctx, next, cur.Revision, nil)
	if err != nil {
		return record.Session{}, err
	}
	return record.Session{Record: next, Revision: rev}, nil
}
