package ingress

import (
	"context"
	"sync"
	"time"

	"github.com/baton-rt/baton/internal/stages"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Event hubs: SSE at scale without a consumer per client.
//
// One hub per watched session holds ONE ordered consumer on the session's
// event subject (baton.events.<sessionID>), started at the subject's last
// event, and fans every event out to all the session's clients. A hub keeps
// a ring of recent events so a joining client usually needs no stream read;
// older history is read with direct gets (reader), which cost no consumer.
// The hub lingers a little after its last client left (reconnects reuse
// it), then stops and deletes its consumer. A client that falls more than
// ClientQueue events behind is not dropped and does not block the hub: its
// queue is discarded and it catches up from the stream.
//
// A hub also subscribes to the session's live subject (live.go): live
// events reach the same client queues, in arrival order with the durable
// ones, within a per-client byte budget.
//
// The consumer count on BATON_EVENTS is therefore the number of watched
// sessions, whatever the number of clients; a handoff changes nothing (the
// session's subject and seq continue).

type hubs struct {
	s      *Server
	mu     sync.Mutex
	m      map[string]*hub
	closed bool
}

func newHubs(s *Server) *hubs { return &hubs{s: s, m: map[string]*hub{}} }

type hub struct {
	hs      *hubs
	id      string
	subject string
	ready   chan struct{} // closed once the consumer runs (or failed: err)
	err     error

	mu      sync.Mutex
	clients map[*client]struct{}
	ring    []event
	cons    jetstream.Consumer
	cc      jetstream.ConsumeContext
	sub     *nats.Subscription // the live subject (a channel subscription)
	live    chan *nats.Msg
	quit    chan struct{}
	// liveDone counts the live messages fanned out; ordered with the
	// durable events through the subscription's Delivered count (see
	// awaitLive).
	liveMu   sync.Mutex
	liveDone int64
	liveCond *sync.Cond
	linger   *time.Timer
	stopped  bool
}

// client is one reader's queue of events, filled by its hub.
type client struct {
	mu        sync.Mutex
	q         []event
	durable   int // durable events in q
	liveBytes int // bytes of live events in q
	max       int
	overflow  bool // q was discarded: catch up from the stream
	closed    bool // the hub stopped
	notify    chan struct{}
	dropped   func() // counts a live event dropped
}

func (c *client) push(ev event) {
	c.mu.Lock()
	switch {
	case c.overflow:
	case ev.live != nil && c.liveBytes+len(ev.data) > liveQueueBytes:
		c.mu.Unlock()
		c.dropped()
		return
	case ev.live != nil:
		c.q, c.liveBytes = append(c.q, ev), c.liveBytes+len(ev.data)
	case c.durable >= c.max:
		c.q, c.overflow, c.durable, c.liveBytes = nil, true, 0, 0
	default:
		c.q, c.durable = append(c.q, ev), c.durable+1
	}
	c.mu.Unlock()
	c.signal()
}

func (c *client) signal() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// take returns the queued events and whether the queue overflowed or the
// hub stopped.
func (c *client) take() (evs []event, overflow, closed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	evs, overflow, closed = c.q, c.overflow, c.closed
	c.q, c.overflow, c.durable, c.liveBytes = nil, false, 0, 0
	return evs, overflow, closed
}

// join attaches a new client to the session's hub, creating the hub if
// needed. It returns the ring's events with seq > after; every later event
// reaches the client's queue.
func (hs *hubs) join(ctx context.Context, id string) (*hub, *client, []event, error) {
	for {
		h, err := hs.get(ctx, id)
		if err != nil {
			return nil, nil, nil, err
		}
		if c, ring, ok := h.add(); ok {
			return h, c, ring, nil
		}
		// The hub expired between get and add: get starts a fresh one.
	}
}

func (h *hub) add() (*client, []event, bool) {
	met := h.hs.s.met
	c := &client{max: h.hs.s.cfg.ClientQueue, notify: make(chan struct{}, 1),
		dropped: func() { met.live.WithLabelValues("dropped").Inc() }}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return nil, nil, false
	}
	if h.linger != nil {
		h.linger.Stop()
		h.linger = nil
	}
	h.clients[c] = struct{}{}
	h.hs.s.met.clients.Inc()
	return c, append([]event(nil), h.ring...), true
}

// get returns the running hub of a session, starting one if needed.
func (hs *hubs) get(ctx context.Context, id string) (*hub, error) {
	for {
		hs.mu.Lock()
		if hs.closed {
			hs.mu.Unlock()
			return nil, fail(ErrUnavailable, "the ingress is shutting down")
		}
		h, found := hs.m[id]
		if !found {
			h = &hub{hs: hs, id: id, subject: hs.s.cfg.Names.Events(id), ready: make(chan struct{}), clients: map[*client]struct{}{}}
			hs.m[id] = h
		}
		hs.mu.Unlock()
		if !found {
			h.start(context.WithoutCancel(ctx))
		}
		select {
		case <-h.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if h.err == nil {
			return h, nil
		}
		if found {
			continue // its creator removes it; try a fresh one
		}
		return nil, h.err
	}
}

// start subscribes to the live subject and creates the hub's ordered
// consumer at the subject's last event.
func (h *hub) start(ctx context.Context) {
	defer close(h.ready)
	s := h.hs.s
	h.live, h.quit = make(chan *nats.Msg, liveChanSize), make(chan struct{})
	h.liveCond = sync.NewCond(&h.liveMu)
	sub, err := s.cfg.NC.ChanSubscribe(s.cfg.Names.Live(h.id), h.live)
	if err != nil {
		h.fail(fail(ErrUnavailable, "follow live events of %s: %v", h.id, err))
		return
	}
	h.sub = sub
	go h.liveLoop()
	cons, err := s.cfg.JS.OrderedConsumer(ctx, s.cfg.Names.EventsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{h.subject}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		InactiveThreshold: 30 * time.Second,
	})
	if err == nil {
		h.cons = cons
		h.cc, err = cons.Consume(h.onMsg, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			s.log.Debug("event hub consumer", "session", h.id, "err", err)
		}))
	}
	if err != nil {
		h.fail(fail(ErrUnavailable, "follow events of %s: %v", h.id, err))
		return
	}
	s.met.hubs.Inc()
}

// fail ends a hub that could not start.
func (h *hub) fail(err error) {
	h.err = err
	h.hs.mu.Lock()
	if h.hs.m[h.id] == h {
		delete(h.hs.m, h.id)
	}
	h.hs.mu.Unlock()
	if h.sub != nil {
		_ = h.sub.Unsubscribe()
		close(h.quit)
	}
	h.deleteConsumer()
}

// liveChanSize is the live subscription's buffer (beyond it the
// connection drops live messages: a slow consumer).
const liveChanSize = 4096

// liveAwait bounds how long a durable event waits for the live events
// received before it to be fanned out.
const liveAwait = 250 * time.Millisecond

// liveLoop fans the live events out, in order, until the hub stops.
func (h *hub) liveLoop() {
	for {
		select {
		case <-h.quit:
			return
		case m := <-h.live:
			h.onLive(m)
			h.liveMu.Lock()
			h.liveDone++
			h.liveCond.Broadcast()
			h.liveMu.Unlock()
		}
	}
}

// onLive fans one live event out.
func (h *hub) onLive(m *nats.Msg) {
	stages.Mark(h.id, "hub.live")
	ev := toLive(h.id, m.Data)
	if ev == nil {
		h.hs.s.met.live.WithLabelValues("invalid").Inc()
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		c.push(*ev)
	}
}

// awaitLive waits (at most liveAwait) until every live message the
// connection received before now is fanned out. The connection's reader
// hands messages to the subscriptions in the order the server sent them,
// and a channel subscription counts a message as delivered when it is
// queued, so a durable event that waits here reaches the clients after
// the deltas the owner published before it (on one server, the owner
// publishes a step's deltas before its commit).
func (h *hub) awaitLive() {
	want, err := h.sub.Delivered()
	if err != nil {
		return
	}
	h.liveMu.Lock()
	defer h.liveMu.Unlock()
	if h.liveDone >= want {
		return
	}
	timer := time.AfterFunc(liveAwait, func() {
		h.liveMu.Lock()
		h.liveCond.Broadcast() // the deadline: wake the waiter
		h.liveMu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(liveAwait)
	for h.liveDone < want && time.Now().Before(deadline) {
		h.liveCond.Wait()
	}
}

// onMsg fans one event out (the consumer calls it serially, in order).
func (h *hub) onMsg(m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		return
	}
	ev, ok := toEvent(meta.Sequence.Stream, m.Headers(), m.Data())
	if !ok {
		return
	}
	stages.Mark(h.id, "hub.durable")
	h.awaitLive()
	stages.Mark(h.id, "hub.awaited")
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := len(h.ring); n > 0 && ev.seq != h.ring[n-1].seq+1 {
		if ev.seq <= h.ring[n-1].seq {
			return // already seen (a consumer reset re-delivers)
		}
		h.ring = h.ring[:0] // a hole: the ring stays contiguous
	}
	if len(h.ring) == h.hs.s.cfg.HubRing {
		h.ring = append(h.ring[:0], h.ring[1:]...)
	}
	h.ring = append(h.ring, ev)
	for c := range h.clients {
		c.push(ev)
	}
}

// leave detaches a client; the last one arms the linger timer.
func (h *hub) leave(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[c]; !ok {
		return
	}
	delete(h.clients, c)
	h.hs.s.met.clients.Dec()
	if len(h.clients) == 0 && !h.stopped {
		h.linger = time.AfterFunc(h.hs.s.cfg.HubLinger, h.expire)
	}
}

// expire stops the hub if it is still unused.
func (h *hub) expire() {
	h.hs.mu.Lock()
	h.mu.Lock()
	idle := len(h.clients) == 0 && !h.stopped
	if idle && h.hs.m[h.id] == h {
		delete(h.hs.m, h.id)
	}
	h.mu.Unlock()
	h.hs.mu.Unlock()
	if idle {
		h.stop()
	}
}

// stop ends the consumer and deletes it, and closes every client.
func (h *hub) stop() {
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	h.stopped = true
	if h.linger != nil {
		h.linger.Stop()
	}
	for c := range h.clients {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.signal()
	}
	h.mu.Unlock()
	if h.sub != nil {
		_ = h.sub.Unsubscribe()
		close(h.quit)
	}
	if h.cc != nil {
		h.cc.Stop()
	}
	h.deleteConsumer()
	h.hs.s.met.hubs.Dec()
}

// deleteConsumer removes the ordered consumer now rather than at its
// inactivity threshold, so stopped hubs do not count against the stream's
// consumer limit.
func (h *hub) deleteConsumer() {
	if h.cons == nil {
		return
	}
	info := h.cons.CachedInfo()
	if info == nil {
		return
	}
	s := h.hs.s
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.cfg.JS.DeleteConsumer(ctx, s.cfg.Names.EventsStream(), info.Name)
}

// close stops every hub (server shutdown).
func (hs *hubs) close() {
	hs.mu.Lock()
	hs.closed = true
	all := make([]*hub, 0, len(hs.m))
	for _, h := range hs.m {
		all = append(all, h)
	}
	hs.m = map[string]*hub{}
	hs.mu.Unlock()
	for _, h := range all {
		<-h.ready
		if h.err == nil {
			h.stop()
		}
	}
}
