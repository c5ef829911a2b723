package pool

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/runtime/session"
)

// loaded is one session this process runs.
type loaded struct {
	s      *session.Session
	cancel context.CancelFunc
	done   chan struct{}
}

// askHibernate asks a loaded session to hibernate if it is quiet.
func (l *loaded) askHibernate() { l.s.Activity().AskHibernate() }

// registry is the process's loaded-session registry for the current lease
// period: the sessions it runs, the claims in progress, the restarts of
// failed runs, the runs it saw stop, the hibernated sessions whose inbox
// re-check runs, the capacity (Config.MaxLoaded) and the goroutines of the
// period. It has its own lock; it starts no session and claims nothing.
type registry struct {
	max      int          // Config.MaxLoaded; 0: no cap
	draining *atomic.Bool // the owner's drain flag: no reservation once set
	metrics  *metrics

	mu       sync.Mutex
	ctx      context.Context // the serving context of the current lease period
	sessions map[string]*loaded
	loading  map[string]bool   // claims in progress (create or Load)
	restarts map[string]int    // consecutive failed runs per session
	stops    map[string]string // per session, its run this process saw stop (lived.go)
	settling int               // hibernated sessions whose inbox re-check runs
	room     chan struct{}     // closed and replaced when a session leaves or a claim ends
	wg       sync.WaitGroup    // session goroutines
	bg       sync.WaitGroup    // adoption, wake and restart goroutines
}

func newRegistry(max int, draining *atomic.Bool, m *metrics) *registry {
	return &registry{max: max, draining: draining, metrics: m, ctx: canceled(),
		sessions: map[string]*loaded{}, loading: map[string]bool{}, restarts: map[string]int{},
		stops: map[string]string{}, room: make(chan struct{})}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// begin starts a lease period with its serving context.
func (r *registry) begin(ctx context.Context) {
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
}

// cancel ends the lease period's context under the lock, which orders it
// with goBG's and add's checks.
func (r *registry) cancel(cancel context.CancelCauseFunc) {
	r.mu.Lock()
	cancel(nil)
	r.mu.Unlock()
}

// serving is the context of the current lease period (canceled while
// fenced).
func (r *registry) serving() context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ctx
}

// goBG runs f in a tracked goroutine of the current lease period, unless
// that period (ctx) is over.
func (r *registry) goBG(ctx context.Context, f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	r.bg.Add(1)
	go func() {
		defer r.bg.Done()
		f()
	}()
}

// add registers a claimed session and returns its run's context, or false
// when the lease period is over: stopAll's Wait may have begun, and an Add
// from zero concurrent with that Wait is a WaitGroup misuse. The check
// under the lock orders it with the period's cancel, as in goBG.
func (r *registry) add(s *session.Session) (*loaded, context.Context, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil {
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(r.ctx)
	l := &loaded{s: s, cancel: cancel, done: make(chan struct{})}
	r.sessions[s.ID()] = l
	r.metrics.loadedNow(len(r.sessions))
	r.wg.Add(1)
	return l, ctx, true
}

// exited ends a session goroutine add counted (after its stopped ran).
func (r *registry) exited() { r.wg.Done() }

// remove takes l out of the loaded set (if it is still the session's
// entry); a hibernated session counts as settling until settled.
func (r *registry) remove(l *loaded, hibernated bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sessions[l.s.ID()] == l {
		delete(r.sessions, l.s.ID())
		r.metrics.loadedNow(len(r.sessions))
		r.freed()
	}
	if hibernated {
		r.settling++ // until its re-check is done (drain waits)
	}
}

// settled ends a hibernated session's re-check.
func (r *registry) settled() {
	r.mu.Lock()
	r.settling--
	r.freed()
	r.mu.Unlock()
}

// stopAll stops every session and waits for them and for the period's
// background goroutines.
func (r *registry) stopAll() {
	r.mu.Lock()
	for _, l := range r.sessions {
		l.cancel()
	}
	r.mu.Unlock()
	r.wg.Wait()
	r.bg.Wait()
}

// ids reports the IDs of the loaded sessions.
func (r *registry) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.sessions))
	for id := range r.sessions {
		ids = append(ids, id)
	}
	return ids
}

func (r *registry) isLoaded(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.sessions[id]
	return ok
}

// beginLoad reserves id for one claim in this process; false if the session
// runs here or another claim of it is in progress.
func (r *registry) beginLoad(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.sessions[id]; ok || r.loading[id] {
		return false
	}
	r.loading[id] = true
	return true
}

func (r *registry) endLoad(id string) {
	r.mu.Lock()
	delete(r.loading, id)
	r.freed()
	r.mu.Unlock()
}

// capacityWait bounds how long a load waits for a quiet session to make room.
const capacityWait = 3 * time.Second

// reserve is beginLoad under the loaded-session cap (Config.MaxLoaded):
// when the process is full, the least recently active quiet sessions are
// asked to hibernate and reserve waits for room. Loaded sessions plus
// claims in progress never exceed the cap, and so neither do this process's
// consumers.
func (r *registry) reserve(ctx context.Context, id string) (bool, error) {
	deadline := time.NewTimer(capacityWait)
	defer deadline.Stop()
	for {
		if r.draining.Load() {
			return false, ErrDraining
		}
		r.mu.Lock()
		if _, ok := r.sessions[id]; ok || r.loading[id] {
			r.mu.Unlock()
			return false, nil
		}
		over := r.max > 0 && len(r.sessions)+len(r.loading) >= r.max
		if !over {
			r.loading[id] = true
			r.mu.Unlock()
			return true, nil
		}
		room := r.room
		victims := r.leastActive(len(r.sessions) + len(r.loading) - r.max + 1)
		r.mu.Unlock()
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

// freed wakes reservations waiting for room; callers hold r.mu.
func (r *registry) freed() {
	close(r.room)
	r.room = make(chan struct{})
}

// leastActive returns up to n loaded sessions, least recently active first.
// Callers hold r.mu.
func (r *registry) leastActive(n int) []*loaded {
	all := make([]*loaded, 0, len(r.sessions))
	for _, l := range r.sessions {
		if l.s != nil {
			all = append(all, l)
		}
	}
	slices.SortFunc(all, func(a, b *loaded) int { return cmp.Compare(a.s.Activity().Last(), b.s.Activity().Last()) })
	return all[:min(n, len(all))]
}

// hibernateAll asks every loaded session to hibernate and reports how many
// sessions are loaded, being claimed or settling, and a channel closed when
// one of them leaves.
func (r *registry) hibernateAll() (int, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.sessions {
		l.askHibernate()
	}
	return len(r.sessions) + len(r.loading) + r.settling, r.room
}

// awaitStopped waits up to timeout for this process's run of id (if any) to
// exit. A run that is the live owner does not exit, and the caller refuses.
func (r *registry) awaitStopped(id string, timeout time.Duration) {
	r.mu.Lock()
	l, ok := r.sessions[id]
	r.mu.Unlock()
	if !ok {
		return
	}
	select {
	case <-l.done:
	case <-time.After(timeout):
	}
}

// restarted counts a failed run of id (reset after a run of more than a
// minute) and returns the failures before it, with the period's context.
func (r *registry) restarted(id string, ran time.Duration) (int, context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ran > time.Minute {
		r.restarts[id] = 0
	}
	n := r.restarts[id]
	r.restarts[id] = n + 1
	return n, r.ctx
}

// sawStop remembers that run runID of session id stopped while this
// process lived (not hibernated, not ended: those settle the record).
func (r *registry) sawStop(id, runID string) {
	r.mu.Lock()
	r.stops[id] = runID
	r.mu.Unlock()
}

// forgetStop drops what sawStop kept for session id: a claim took it, or
// it runs elsewhere now.
func (r *registry) forgetStop(id string) {
	r.mu.Lock()
	delete(r.stops, id)
	r.mu.Unlock()
}

// lived reports whether this process saw run runID of session id stop.
func (r *registry) lived(id, runID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return runID != "" && r.stops[id] == runID
}
