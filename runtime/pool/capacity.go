package pool

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"
)

// ErrAtCapacity reports that this owner process holds its maximum of loaded
// sessions and none could hibernate in time.
var ErrAtCapacity = errors.New("pool: owner process at its loaded-session capacity")

// capacityWait bounds how long a load waits for a quiet session to make room.
const capacityWait = 3 * time.Second

// reserve is beginLoad under the loaded-session cap (Config.MaxLoaded):
// when the process is full, the least recently active quiet sessions are
// asked to hibernate and reserve waits for room. Loaded sessions plus
// claims in progress never exceed the cap, and so neither do this process's
// consumers.
func (o *Owner) reserve(ctx context.Context, id string) (bool, error) {
	deadline := time.NewTimer(capacityWait)
	defer deadline.Stop()
	for {
		if o.draining.Load() {
			return false, ErrDraining
		}
		o.mu.Lock()
		if _, ok := o.sessions[id]; ok || o.loading[id] {
			o.mu.Unlock()
			return false, nil
		}
		over := o.cfg.MaxLoaded > 0 && len(o.sessions)+len(o.loading) >= o.cfg.MaxLoaded
		if !over {
			o.loading[id] = true
			o.mu.Unlock()
			return true, nil
		}
		room := o.room
		victims := o.leastActive(len(o.sessions) + len(o.loading) - o.cfg.MaxLoaded + 1)
		o.mu.Unlock()
		for _, l := range victims {
			l.askHibernate()
		}
		select {
		case <-room:
		case <-deadline.C:
			return false, ErrAtCapacity
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// freed wakes reservations waiting for room; callers hold o.mu.
func (o *Owner) freed() {
	close(o.room)
	o.room = make(chan struct{})
}

// leastActive returns up to n loaded sessions, least recently active first.
// Callers hold o.mu.
func (o *Owner) leastActive(n int) []*loaded {
	all := make([]*loaded, 0, len(o.sessions))
	for _, l := range o.sessions {
		if l.s != nil {
			all = append(all, l)
		}
	}
	slices.SortFunc(all, func(a, b *loaded) int { return cmp.Compare(a.s.Active(), b.s.Active()) })
	return all[:min(n, len(all))]
}

// askHibernate asks a loaded session to hibernate if it is quiet.
func (l *loaded) askHibernate() { l.s.AskHibernate() }
