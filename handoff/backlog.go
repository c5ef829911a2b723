package handoff

import "context"

// Backlog answers step 2 of the transaction: did anything but the trigger
// arrive on the session's inbox? After returns the lowest sequence above
// seq stored on any of the tokens' inbox subjects, or 0 when there is none.
// It must read the stream leader: a lagging replica could hide a command
// that arrived before staging, and the session would move with a backlog
// (the successor would still process it in order, but a backlog stays on
// the source). kv implements it (kv.Backlog, one leader read per token);
// the compile-time check lives where they are wired.
type Backlog interface {
	After(ctx context.Context, tokens []string, seq uint64) (uint64, error)
}
