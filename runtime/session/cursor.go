package session

import (
	"context"
	"log/slog"
	"time"
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
	// raised counts the raises of purgeAt since the last purge, the first
	// of them at since: a tick purges only once they are many or old.
	raised int
	since  time.Time
}

// A purge of an inbox subject makes the server scan every consumer of
// BATON_INBOX (one per loaded session), so a busy session's tick purges
// only once its processed commands are purgeMany or the oldest of them is
// purgeAfter old; hibernation and the end purge at once.
const (
	purgeMany  = 32
	purgeAfter = 10 * time.Second
)

// open (re)opens the cursor at start (fresh: the first open of this run's
// consumer).
func (c *cursor) open(ctx context.Context, start uint64, fresh bool) error {
	c.close()
	r, err := c.create(ctx, start, fresh)
	if err != nil {
		return err
	}
	c.reader = r
	return nil
}

// create opens a reader on the cursor's consumer at start without making
// it the cursor's (adopt does): it reads only the cursor's name and tokens,
// so it may run beside the session loop.
func (c *cursor) create(ctx context.Context, start uint64, fresh bool) (Reader, error) {
	return c.inbox.Open(ctx, Cursor{Name: c.name, Tokens: c.tokens, Start: start, Fresh: fresh})
}

// adopt makes r, a reader open on the cursor's consumer, the cursor's.
func (c *cursor) adopt(r Reader) {
	c.close()
	c.reader = r
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
func (c *cursor) purge(below uint64, now time.Time) {
	if below <= c.purgeAt {
		return
	}
	if c.raised == 0 {
		c.since = now
	}
	c.purgeAt = below
	c.raised++
}

// tickPurge is flushPurge on the clock tick: once the processed commands
// are many or old enough (purgeMany, purgeAfter).
func (c *cursor) tickPurge(ctx context.Context, now time.Time, leaseValid bool, log *slog.Logger) {
	if c.raised < purgeMany && now.Sub(c.since) < purgeAfter {
		return
	}
	c.flushPurge(ctx, leaseValid, log)
}

// flushPurge purges this session's processed commands below the lowest
// unapplied sequence, on each of its inbox subjects: from the tick
// (tickPurge), never after a commit, to keep purges off the delivery path;
// at once before hibernation and at the end.
func (c *cursor) flushPurge(ctx context.Context, leaseValid bool, log *slog.Logger) {
	if c.purgeAt <= c.purged+1 || !leaseValid {
		return
	}
	if err := c.inbox.Purge(ctx, c.tokens, c.purgeAt); err != nil {
		log.Debug("purge failed; retried on the next tick", "err", err)
		return
	}
	c.purged, c.raised = c.purgeAt-1, 0
}
