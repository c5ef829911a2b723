package handoff

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-rt/baton/internal/jsx"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
)

// Backlog answers step 2 of the transaction: did anything but the trigger
// arrive on the session's inbox? After returns the lowest sequence above
// seq stored on any of the tokens' inbox subjects, or 0 when there is none.
// It must read the stream leader: a lagging replica could hide a command
// that arrived before staging, and the session would move with a backlog
// (the successor would still process it in order, but DESIGN.md §6 keeps a
// backlog on the source).
type Backlog interface {
	After(ctx context.Context, tokens []string, seq uint64) (uint64, error)
}

// StreamBacklog is the Backlog over BATON_INBOX: one leader message get
// (next_by_subj from seq+1) per token.
type StreamBacklog struct {
	NC    *nats.Conn
	Names subjects.Names
}

// After implements Backlog.
func (b StreamBacklog) After(ctx context.Context, tokens []string, seq uint64) (uint64, error) {
	if b.Names == (subjects.Names{}) {
		return 0, fmt.Errorf("%w: StreamBacklog without subjects.Names", ErrInvalid)
	}
	var first uint64
	for _, tok := range tokens {
		m, err := jsx.LeaderGet(ctx, b.NC, b.Names.InboxStream(), jsx.Query{Seq: seq + 1, NextFor: b.Names.Inbox(tok)})
		switch {
		case errors.Is(err, jsx.ErrNotFound):
			continue
		case err != nil:
			return 0, fmt.Errorf("handoff: backlog of %s: %w", b.Names.Inbox(tok), err)
		}
		if first == 0 || m.Sequence < first {
			first = m.Sequence
		}
	}
	return first, nil
}
