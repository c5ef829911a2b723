package session

import (
	"context"
	"log/slog"
)

// cursor is the session's cursor over its merged FIFO: the consumer
// <sessionID>-<epoch> over every token of the session (Inbox), and the
// reader open on it. Only the session loop uses it.
type cursor struct {
	inbox  Inbox
	name   string   // <sessionID>-<epoch>
	tokens []string // encoded tokens: stable first, then aliases
	reader Reader   // nil: closed
	// purgeAt is the lowest unapplied sequence to purge below (the
	// machine's Purge); purged is what the last purge reached.
	purgeAt, purged uint64
}

// open (re)opens the cursor at start (fresh: the first open of this run's
// consumer).
func (c *cursor) open(ctx context.Context, start uint64, fresh bool) error {
	c.close()
	r, err := c.inbox.Open(ctx, Cursor{Name: c.name, Tokens: c.tokens, Start: start, Fresh: fresh})
	if err != nil {
		return err
	}
	c.reader = r
	return nil
}

func (c *cursor) close() {
	if c.reader != nil {
		c.reader.Close()
		c.reader = nil
	}
}

// deliveries is the open reader's channel (nil, which blocks, while
// closed).
func (c *cursor) deliveries() <-chan Delivery {
	if c.reader == nil {
		return nil
	}
	return c.reader.Deliveries()
}

// lost is the open reader's loss signal (nil while closed).
func (c *cursor) lost() <-chan error {
	if c.reader == nil {
		return nil
	}
	return c.reader.Lost()
}

// purge raises the sequence below which the cursor's subjects are purged.
func (c *cursor) purge(below uint64) { c.purgeAt = max(c.purgeAt, below) }

// flushPurge purges this session's processed commands below the lowest
// unapplied sequence, on each of its inbox subjects. It runs on the tick,
// not after every commit, to keep purges off the delivery path.
func (c *cursor) flushPurge(ctx context.Context, leaseValid bool, log *slog.Logger) {
	if c.purgeAt <= c.purged+1 || !leaseValid {
		return
	}
	if err := c.inbox.Purge(ctx, c.tokens, c.purgeAt); err != nil {
		log.Debug("purge failed; retried on the next tick", "err", err)
		return
	}
	c.purged = c.purgeAt - 1
}
