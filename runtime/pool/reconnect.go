package pool

import (
	"context"
	"time"
)

// watchReconnects signals every session after the connection reconnected:
// consumers are memory-storage and vanish when the server restarts.
func (o *Owner) watchReconnects(ctx context.Context) {
	last := o.cfg.NC.Stats().Reconnects
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n := o.cfg.NC.Stats().Reconnects; n != last {
			last = n
			o.reconnMu.Lock()
			close(o.reconnCh)
			o.reconnCh = make(chan struct{})
			o.reconnMu.Unlock()
		}
	}
}

// reconnected is closed at the next reconnect.
func (o *Owner) reconnected() <-chan struct{} {
	o.reconnMu.Lock()
	defer o.reconnMu.Unlock()
	return o.reconnCh
}
