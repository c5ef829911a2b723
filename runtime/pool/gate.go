package pool

import (
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/baton-rt/baton/record"
)

// gate is the quarantine gate of the process's boot attempts: the backoff
// between a session's counted attempts (Config.QuarantineBackoff), the
// retries scheduled after it (one per session at a time), and the suspect
// slot (one counted boot at a time). It has its own lock and claims
// nothing: load.go and quarantine.go ask it.
type gate struct {
	steps []time.Duration // Config.QuarantineBackoff
	now   func() time.Time

	mu        sync.Mutex
	retrying  map[string]bool // boot attempts scheduled after the backoff
	suspect   string          // the counted boot this process runs now
	suspectAt time.Time
}

func newGate(steps []time.Duration, now func() time.Time) *gate {
	return &gate{steps: steps, now: now, retrying: map[string]bool{}}
}

// backoffLeft is how long the next boot attempt of rec must still wait:
// the backoff after its counted attempts, stretched by up to a half by a
// jitter fixed per session and attempt (every process computes the same,
// and sessions that failed together do not retry together), less the time
// since the last attempt.
func (g *gate) backoffLeft(rec record.SessionRecord) time.Duration {
	n := rec.BootAttempts
	if n == 0 || len(g.steps) == 0 || rec.BootAttemptAt.IsZero() {
		return 0
	}
	b := g.steps[min(n, len(g.steps))-1]
	b += jitter(rec.SessionID, n, b/2)
	return b - g.now().Sub(rec.BootAttemptAt)
}

// jitter is a duration in [0, span), fixed by the session and attempt.
func jitter(id string, n int, span time.Duration) time.Duration {
	if span <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(id + "/" + strconv.Itoa(n)))
	return time.Duration(h.Sum64() % uint64(span))
}

// scheduleRetry marks a retry of session id as scheduled; false if one is
// already.
func (g *gate) scheduleRetry(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.retrying[id] {
		return false
	}
	g.retrying[id] = true
	return true
}

// retried clears the scheduled retry of session id (it is due).
func (g *gate) retried(id string) {
	g.mu.Lock()
	delete(g.retrying, id)
	g.mu.Unlock()
}

// A counted boot (a suspect: its last owner vanished with a step in flight
// or mid-boot) runs alone among suspects in a process, for suspectHold at
// most: when one session's step kills its process, every session that was
// mid-step there becomes a suspect, and re-run side by side the culprit
// would kill its innocent neighbours again. One at a time, a neighbour's
// re-run settles (its counter back to 0) before the culprit's next run, or
// runs in a process the culprit is not in.
const (
	suspectHold  = 2 * time.Second
	suspectRetry = 100 * time.Millisecond
)

// takeSuspect reserves this process's suspect slot for session id; false
// while another suspect holds it (for less than suspectHold).
func (g *gate) takeSuspect(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.suspect != "" && g.suspect != id && time.Since(g.suspectAt) < suspectHold {
		return false
	}
	g.suspect, g.suspectAt = id, time.Now()
	return true
}

// dropSuspect frees the suspect slot if session id holds it: its run
// settled (a commit reset its counter) or stopped.
func (g *gate) dropSuspect(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.suspect == id {
		g.suspect = ""
	}
}
