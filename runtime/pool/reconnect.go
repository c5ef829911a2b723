package pool

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// reconnects signals every session after the connection reconnected:
// consumers are memory-storage and vanish when the server restarts.
type reconnects struct {
	nc *nats.Conn
	mu sync.Mutex
	ch chan struct{} // closed and replaced on every reconnect
}

func newReconnects(nc *nats.Conn) *reconnects {
	return &reconnects{nc: nc, ch: make(chan struct{})}
}

// watch polls the connection's reconnect count until ctx ends.
func (r *reconnects) watch(ctx context.Context) {
	last := r.nc.Stats().Reconnects
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n := r.nc.Stats().Reconnects; n != last {
			last = n
			r.mu.Lock()
			close(r.ch)
			r.ch = make(chan struct{})
			r.mu.Unlock()
		}
	}
}

// next is closed at the next reconnect.
func (r *reconnects) next() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ch
}
