package jsport

import (
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go"
)

// Live is session.Live on core NATS: a session's live events on its live
// subject (baton.live.<sessionID>), not stored by any stream.
// nats.Conn.Publish buffers; the session's streamer calls it from its own
// goroutine, so a slow connection delays only the deltas.
type Live struct {
	NC    *nats.Conn
	Names subjects.Names
	// Count, if set, is told each publish's outcome: "published" or
	// "failed" (the owner's baton_owner_live_total).
	Count func(outcome string)
}

var _ session.Live = Live{}

// Publish publishes msg on the session's live subject.
func (l Live) Publish(sessionID string, msg []byte) {
	outcome := "published"
	if err := l.NC.Publish(l.Names.Live(sessionID), msg); err != nil {
		outcome = "failed"
	}
	if l.Count != nil {
		l.Count(outcome)
	}
}
