package session

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// purgeCounter is an Inbox that counts purges (the cursor's tick uses
// nothing else of it).
type purgeCounter struct {
	Inbox
	purges []uint64 // each purge's below
}

func (p *purgeCounter) Purge(_ context.Context, _ []string, below uint64) error {
	p.purges = append(p.purges, below)
	return nil
}

// A busy session's tick purges its processed commands only once they are
// purgeMany or the oldest of them is purgeAfter old (each purge scans
// every consumer of the inbox stream on the server); a flush (hibernation,
// the end) purges at once; a process without a valid lease never purges.
func TestTickPurgeWaitsForManyOrOld(t *testing.T) {
	ctx, log := t.Context(), slog.New(slog.DiscardHandler)
	in := &purgeCounter{}
	c := &cursor{inbox: in, tokens: []string{"S"}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	c.tickPurge(ctx, t0, true, log) // nothing applied: nothing to purge
	c.purge(11, t0)
	c.purge(12, t0.Add(time.Second))
	c.tickPurge(ctx, t0.Add(2*time.Second), true, log)
	if len(in.purges) != 0 {
		t.Fatalf("purged %v two commands and 2 s after the first", in.purges)
	}
	c.tickPurge(ctx, t0.Add(purgeAfter), false, log)
	if len(in.purges) != 0 {
		t.Fatalf("purged %v without a valid lease", in.purges)
	}
	c.tickPurge(ctx, t0.Add(purgeAfter), true, log)
	if len(in.purges) != 1 || in.purges[0] != 12 {
		t.Fatalf("purges %v, want one below 12 once the first is %v old", in.purges, purgeAfter)
	}
	// many at once: purged on the next tick, however young
	t1 := t0.Add(time.Minute)
	for i := range purgeMany {
		c.purge(uint64(13+i), t1)
	}
	c.tickPurge(ctx, t1, true, log)
	if len(in.purges) != 2 || in.purges[1] != uint64(12+purgeMany) {
		t.Fatalf("purges %v, want a second below %d after %d commands", in.purges, 12+purgeMany, purgeMany)
	}
	// a flush does not wait
	c.purge(100, t1)
	c.flushPurge(ctx, true, log)
	if len(in.purges) != 3 || in.purges[2] != 100 {
		t.Fatalf("purges %v, want a third below 100 by the flush", in.purges)
	}
	c.tickPurge(ctx, t1.Add(time.Hour), true, log)
	if len(in.purges) != 3 {
		t.Fatalf("purges %v: a tick purged again with nothing new", in.purges)
	}
}
