package harness

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Accepted is a command an ingress accepted, as the client saw it.
type Accepted struct {
	Seq  uint64
	Key  string // idempotency key
	What string
	Via  string    // deployment of the ingress that accepted it
	Sent time.Time // the first attempt to send it (zero: not kept)
}

// AcceptLog is every command accepted per session, in acceptance order
// (the order a session's client saw its receipts), safe for concurrent
// use.
type AcceptLog struct {
	mu sync.Mutex
	by map[string][]Accepted
}

// NewAcceptLog is an empty log.
func NewAcceptLog() *AcceptLog { return &AcceptLog{by: map[string][]Accepted{}} }

// Add appends c to sid's accepted commands.
func (a *AcceptLog) Add(sid string, c Accepted) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.by[sid] = append(a.by[sid], c)
}

// Get is sid's accepted commands in acceptance order.
func (a *AcceptLog) Get(sid string) []Accepted {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.by[sid])
}

// Sessions lists the sessions with an accepted command, sorted.
func (a *AcceptLog) Sessions() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Sorted(maps.Keys(a.by))
}

// Each runs f for every item in parallel (at most par at once) and returns
// the first error.
func Each[S any](items []S, par int, f func(S) error) error {
	sem := make(chan struct{}, par)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for _, s := range items {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := f(s); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}
