package kv

import "sync"

// markerHints remembers, per session, the revision of the delete marker
// this process last left on the session's handoff-marker key, so that the
// next CreateMarker of that session expects it at once. A session handed
// off twice or more has a delete marker on the key (its last handoff's
// marker, removed by its candidate); a create-only write expecting no
// message there conflicts, and the leader read and the second write that
// settle it were two more round trips on every handoff's path. The next
// handoff of a session usually starts in the process that removed the
// last marker: its candidate became its owner. A hint is only the first
// expectation of the create: a wrong one (the marker expired, another
// process wrote the key since) conflicts and the create settles by the
// leader read as before, so hints never decide anything.
type markerHints struct {
	mu   sync.Mutex
	revs map[string]uint64 // session ID → the delete marker's revision
}

// maxMarkerHints bounds the hints a process keeps: one per session that
// was handed to it and not handed on since. Past it one is dropped (the
// session's next create costs the settling round trips).
const maxMarkerHints = 4096

// put records rev as sessionID's delete marker revision.
func (h *markerHints) put(sessionID string, rev uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.revs == nil {
		h.revs = map[string]uint64{}
	}
	if _, ok := h.revs[sessionID]; !ok && len(h.revs) >= maxMarkerHints {
		for k := range h.revs {
			delete(h.revs, k)
			break
		}
	}
	h.revs[sessionID] = rev
}

// take returns and forgets sessionID's hint (0: none).
func (h *markerHints) take(sessionID string) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	rev := h.revs[sessionID]
	delete(h.revs, sessionID)
	return rev
}
