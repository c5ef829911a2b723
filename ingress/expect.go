package ingress

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
)

// expect refuses an input or authorization answer whose requestId or
// attemptId the session does not wait for: 409 unknown_request, with the
// IDs it does wait for in error.expected. It returns the target the answer
// goes to: t itself, or — when the ID is not t's own wait but one of its
// descendants' outstanding waits (the checkpoint's childWaits) — the child
// session that waits, resolved by its session ID (its record's wire
// version, its deployment). Nothing else is checked here.
//
// The waits are in the checkpoint of the session record, read from the
// stream leader: a replica may lag behind the commit that opened the wait,
// and a client answers a request as soon as it sees input.requested or
// auth.requested (or child.waiting), which are published after that
// commit. A repeat of an answer that was accepted with an idempotencyKey
// passes (its receipt is there): the wait it answered has gone since, and
// the repeat is answered with the first receipt.
func (s *Server) expect(ctx context.Context, a *attached, t target, r *Request, commandID string) (target, error) {
	id, what, ok := answers(r)
	if !ok {
		return t, nil
	}
	cur, err := a.store.LeaderSession(ctx, t.sessionID)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return t, fail(ErrUnavailable, "session %s is being created or undone; retry", t.sessionID)
	case err != nil:
		return t, fail(ErrUnavailable, "read session %s: %v", t.sessionID, err)
	}
	w, err := waitsOf(cur.Record.Checkpoint, r.Kind)
	if err != nil {
		return t, fail(ErrUnavailable, "session %s: checkpoint: %v", t.sessionID, err)
	}
	if slices.Contains(w.own, id) {
		return t, nil
	}
	if child, ok := w.children[id]; ok {
		return s.routeToChild(ctx, a, t, child)
	}
	if r.IdempotencyKey != "" {
		if seen, err := a.receipts.has(ctx, t.sessionID, commandID); err != nil || seen {
			return t, err
		}
	}
	expected := w.expected()
	waiting := "for none"
	if len(expected) > 0 {
		waiting = "for " + strings.Join(expected, ", ")
	}
	return t, &Error{Err: ErrConflict, Detail: CodeUnknownRequest, Expected: expected,
		Message: fmt.Sprintf("session %s is not waiting for %s %q (it waits %s)", t.sessionID, what, clip(id), waiting)}
}

// routeToChild resolves the child session an answer is routed to.
func (s *Server) routeToChild(ctx context.Context, a *attached, parent target, childID string) (target, error) {
	t, err := s.resolveID(ctx, a, &Request{SessionID: childID})
	if err != nil {
		e := asError(err)
		return parent, &Error{Err: e.Err, Detail: e.Detail, Message: fmt.Sprintf("session %s's child session %s waits for the answer: %s", parent.sessionID, childID, e.Message)}
	}
	return t, nil
}

// answers returns the ID an input or authorization answer is for.
func answers(r *Request) (id, what string, ok bool) {
	switch {
	case r.Kind == wire.KindInputResponse && r.Input != nil:
		return r.Input.RequestID, "input request", true
	case r.Kind == wire.KindAuthCallback && r.Auth != nil:
		return r.Auth.AttemptID, "authorization attempt", true
	}
	return "", "", false
}

// waits are the IDs of one sort (input requests or authorization
// attempts) a session waits for: its own, and its descendants' by the
// child session that waits.
type waits struct {
	own      []string
	children map[string]string // wait ID → child session ID
	order    []string          // children's wait IDs, in checkpoint order
}

// expected lists every ID, the session's own first; never nil.
func (w waits) expected() []string {
	return append(append([]string{}, w.own...), w.order...)
}

// waitsOf reads the waits of kind's sort in a record's checkpoint (none in
// a session that has not committed yet).
func waitsOf(checkpoint []byte, kind wire.Kind) (waits, error) {
	w := waits{children: map[string]string{}}
	if len(checkpoint) == 0 {
		return w, nil
	}
	cp, err := wire.DecodeCheckpoint(checkpoint)
	if err != nil {
		return w, err
	}
	switch {
	case kind == wire.KindInputResponse && cp.Waits.Input != nil:
		w.own = append(w.own, cp.Waits.Input.RequestID)
	case kind == wire.KindAuthCallback && cp.Waits.Auth != nil:
		w.own = append(w.own, cp.Waits.Auth.AttemptID)
	}
	for _, cw := range cp.ChildWaits {
		id := cw.RequestID
		if kind == wire.KindAuthCallback {
			id = cw.AttemptID
		}
		if _, dup := w.children[id]; id == "" || dup || slices.Contains(w.own, id) {
			continue
		}
		w.children[id] = cw.ChildSessionID
		w.order = append(w.order, id)
	}
	return w, nil
}
