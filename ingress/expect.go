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
// IDs it does wait for in error.expected. Nothing else is checked here.
//
// The waits are in the checkpoint of the session record, read from the
// stream leader: a replica may lag behind the commit that opened the wait,
// and a client answers a request as soon as it sees input.requested or
// auth.requested, which are published after that commit. A repeat of an
// answer that was accepted with an idempotencyKey passes (its receipt is
// there): the wait it answered has gone since, and the repeat is answered
// with the first receipt.
//
// Sessions have no child sessions yet; once they do, the IDs of a parent's
// outstanding child waits are expected too, and routed.
func (s *Server) expect(ctx context.Context, a *attached, t target, r *Request, commandID string) error {
	id, what, ok := answers(r)
	if !ok {
		return nil
	}
	cur, err := a.store.LeaderSession(ctx, t.sessionID)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return fail(ErrUnavailable, "session %s is being created or undone; retry", t.sessionID)
	case err != nil:
		return fail(ErrUnavailable, "read session %s: %v", t.sessionID, err)
	}
	expected, err := waitIDs(cur.Record.Checkpoint, r.Kind)
	if err != nil {
		return fail(ErrUnavailable, "session %s: checkpoint: %v", t.sessionID, err)
	}
	if slices.Contains(expected, id) {
		return nil
	}
	if r.IdempotencyKey != "" {
		if seen, err := a.receipts.has(ctx, t.sessionID, commandID); err != nil || seen {
			return err
		}
	}
	waiting := "for none"
	if len(expected) > 0 {
		waiting = "for " + strings.Join(expected, ", ")
	}
	return &Error{Err: ErrConflict, Detail: CodeUnknownRequest, Expected: expected,
		Message: fmt.Sprintf("session %s is not waiting for %s %q (it waits %s)", t.sessionID, what, clip(id), waiting)}
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

// waitIDs are the IDs of the waits of kind's sort in a record's checkpoint
// (none in a session that has not committed yet); never nil.
func waitIDs(checkpoint []byte, kind wire.Kind) ([]string, error) {
	ids := []string{}
	if len(checkpoint) == 0 {
		return ids, nil
	}
	cp, err := wire.DecodeCheckpoint(checkpoint)
	if err != nil {
		return nil, err
	}
	switch {
	case kind == wire.KindInputResponse && cp.Waits.Input != nil:
		ids = append(ids, cp.Waits.Input.RequestID)
	case kind == wire.KindAuthCallback && cp.Waits.Auth != nil:
		ids = append(ids, cp.Waits.Auth.AttemptID)
	}
	return ids, nil
}
