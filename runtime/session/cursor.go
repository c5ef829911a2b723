package session

import "context"

// cursor is the session's cursor over its merged FIFO: the consumer
// <sessionID>-<epoch> over every token of the session (Inbox), and the
// reader open on it. Only the session loop uses it.
type cursor struct {
	inbox  Inbox
	name   string   // <sessionID>-<epoch>
	tokens []string // encoded tokens: stable first, then aliases
	reader Reader   // nil: closed
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
