package handoff

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-rt/baton/record"
)

// Status is what Resolve learned about a session.
type Status struct {
	// Found is false only when there is neither a record nor a marker: the
	// one case an ingress may call "no session".
	Found bool
	// Alive: found and not ended. A session mid-handoff is alive.
	Alive bool
	// MidHandoff: the record is staged (state handoff) or a marker exists.
	MidHandoff bool
	// Ended: the record is ended (the ingress answers 410).
	Ended   bool
	Session record.Session // zero when there is no record
	Marker  *record.Marker // nil when there is no marker
}

// Resolve reports a session as an ingress must see it: a session in state
// handoff, or with a marker, is alive and mid-handoff — never "no session"
// (docs/handoff.md), so an ingress never creates a replacement. The record is
// read by direct get (a hint; a miss is confirmed by a leader read), the
// marker from the leader.
func Resolve(ctx context.Context, r Reader, sessionID string) (Status, error) {
	var st Status
	s, err := r.GetSession(ctx, sessionID)
	if errors.Is(err, record.ErrNotFound) {
		s, err = r.LeaderSession(ctx, sessionID)
	}
	switch {
	case err == nil:
		st.Found, st.Session = true, s
	case !errors.Is(err, record.ErrNotFound):
		return Status{}, fmt.Errorf("handoff: resolve %s: %w", sessionID, err)
	}
	m, _, err := r.GetMarker(ctx, sessionID)
	switch {
	case err == nil:
		st.Found, st.Marker = true, &m
	case !errors.Is(err, record.ErrNotFound):
		return Status{}, fmt.Errorf("handoff: resolve %s marker: %w", sessionID, err)
	}
	st.Ended = st.Session.Revision != 0 && st.Session.Record.State == record.StateEnded
	st.Alive = st.Found && !st.Ended
	st.MidHandoff = st.Alive && (st.Session.Record.State == record.StateHandoff || st.Marker != nil)
	return st, nil
}

// Clean removes a session's marker once its handoff is over: the record
// (leader read) is no longer staged for the marker's handoff ID. A marker
// is written only after its stage, and a record never returns to a staged
// state for the same handoff ID, so such a marker can never become live
// again. The delete is conditional on the marker's revision. Owners call
// Clean after every claim (boot, adoption); the transaction calls it when a
// leftover marker blocks a new one. It reports whether a marker was
// removed.
func Clean(ctx context.Context, st Store, sessionID string) (bool, error) {
	m, rev, err := st.GetMarker(ctx, sessionID)
	if errors.Is(err, record.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	s, err := st.LeaderSession(ctx, sessionID)
	if err != nil && !errors.Is(err, record.ErrNotFound) {
		return false, err
	}
	if h := s.Record.Handoff; err == nil && s.Record.State == record.StateHandoff && h != nil && h.ID == m.HandoffID {
		return false, nil
	}
	if err := st.DeleteMarker(ctx, sessionID, rev); err != nil {
		return false, err
	}
	return true, nil
}
