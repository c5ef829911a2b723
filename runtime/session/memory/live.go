package memory

import (
	"slices"
	"sync"

	"github.com/baton-rt/baton/runtime/session"
)

// Live is session.Live in memory: it records every live event published,
// with how many of the session's events had been appended to Events at
// that moment (so a test can check that a step's deltas precede its
// durable events).
type Live struct {
	events *Events
	mu     sync.Mutex
	msgs   map[string][]LiveMsg
}

// LiveMsg is one recorded live event.
type LiveMsg struct {
	Data []byte
	// EventsBefore is the number of the session's events in Events when
	// the live event was published.
	EventsBefore int
}

// NewLive returns a Live that reads the event counts from events (nil:
// EventsBefore is always 0).
func NewLive(events *Events) *Live { return &Live{events: events, msgs: map[string][]LiveMsg{}} }

var _ session.Live = (*Live)(nil)

// Publish implements session.Live.
func (l *Live) Publish(sessionID string, msg []byte) {
	n := 0
	if l.events != nil {
		n = len(l.events.Stream(sessionID))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs[sessionID] = append(l.msgs[sessionID], LiveMsg{Data: slices.Clone(msg), EventsBefore: n})
}

// Messages returns a copy of the live events published for a session.
func (l *Live) Messages(sessionID string) []LiveMsg {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.msgs[sessionID])
}
