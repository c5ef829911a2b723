package session

import (
	"sync"
	"time"
	"unicode/utf8"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// Live output of a step (runtime.Stream): deltas, published on the
// session's live subject through the Live port, never durable.
//
// Each step gets a streamer, the runtime.Sink of its context. Text only
// appends to a bounded buffer and wakes the streamer's publisher
// goroutine (started at the first delta), so a step never waits for
// NATS. When the step is over, finish closes the streamer (later deltas
// are dropped: an abandoned step that runs on cannot stream after its
// end), waits a bounded time for the publisher to hand every buffered
// delta to the connection — so the deltas precede the step's durable
// events, which are published after the commit on the same connection —
// and, for a step whose result will not be committed (failed, cancelled,
// timed out), publishes message.discarded. A step re-run at boot after a
// crash is preceded by message.discarded (the crashed run may have
// streamed).

// Bounds of a step's live output.
const (
	// livePending bounds the text waiting for the publisher: a delta that
	// would exceed it is dropped (counted).
	livePending = 1 << 20
	// liveBatch is how many buffered deltas the publisher sends as they
	// are before it merges them (a publisher behind its step).
	liveBatch = 64
	// liveFlushWait bounds how long the end of a step waits for its
	// deltas to be handed to the connection.
	liveFlushWait = 2 * time.Second
)

// Live publishes a session's live events (wire.EncodeLive messages) on its
// live subject. Publish must not block beyond the connection's buffer; a
// failed publish is the port's to count, not the step's.
type Live interface {
	Publish(sessionID string, msg []byte)
}

// streamer is one step's runtime.Sink.
type streamer struct {
	live       Live
	obs        Observer
	session    string
	deployment string
	turn       string
	step       uint64
	now        func() time.Time

	mu      sync.Mutex
	pending []string
	size    int
	closed  bool
	running bool
	wake    chan struct{}
	done    chan struct{} // closed when the publisher exits
}

// newStreamer returns the sink of step in, or nil when the process has no
// Live port (a nil *streamer is a valid, discarding sink).
func newStreamer(env *Env, session string, in runtime.StepInput) *streamer {
	if env.Live == nil {
		return nil
	}
	return &streamer{
		live: env.Live, obs: env.Observer, session: session, deployment: env.Deployment,
		turn: in.TurnID, step: uint64(in.Step), now: env.Now,
		wake: make(chan struct{}, 1), done: make(chan struct{}),
	}
}

// Text implements runtime.Sink: it buffers delta for the publisher.
func (st *streamer) Text(delta string) {
	if st == nil || delta == "" {
		return
	}
	st.mu.Lock()
	if st.closed || st.size+len(delta) > livePending {
		closed := st.closed
		st.mu.Unlock()
		if !closed {
			st.obs.LiveDropped(1)
		}
		return
	}
	st.pending = append(st.pending, delta)
	st.size += len(delta)
	if !st.running {
		st.running = true
		go st.publish()
	}
	st.mu.Unlock()
	select {
	case st.wake <- struct{}{}:
	default:
	}
}

// publish sends buffered deltas until the streamer is closed and drained.
func (st *streamer) publish() {
	defer close(st.done)
	for {
		st.mu.Lock()
		batch, closed := st.pending, st.closed
		st.pending, st.size = nil, 0
		st.mu.Unlock()
		if len(batch) > liveBatch {
			batch = merge(batch)
		}
		for _, d := range batch {
			st.send(d)
		}
		if closed && len(batch) == 0 {
			return
		}
		if len(batch) == 0 {
			<-st.wake
		}
	}
}

// send publishes one delta, split into messages of at most
// wire.MaxLiveTextBytes at rune boundaries.
func (st *streamer) send(text string) {
	for text != "" {
		n := len(text)
		if n > wire.MaxLiveTextBytes {
			n = wire.MaxLiveTextBytes
			for n > 0 && !utf8.RuneStart(text[n]) {
				n--
			}
		}
		st.emit(wire.MessageDelta{TurnID: st.turn, Step: st.step, Text: text[:n]})
		text = text[n:]
	}
}

func (st *streamer) emit(body any) {
	msg, err := wire.EncodeLive(st.session, st.deployment, st.now(), body)
	if err == nil {
		st.live.Publish(st.session, msg)
	}
}

// finish ends the step's live output: no delta after it, the buffered ones
// handed to the connection (bounded by liveFlushWait), then
// message.discarded when the step's result will not be committed.
func (st *streamer) finish(discard bool) {
	if st == nil {
		return
	}
	st.mu.Lock()
	st.closed = true
	running := st.running
	st.mu.Unlock()
	if running {
		select {
		case st.wake <- struct{}{}:
		default:
		}
		t := time.NewTimer(liveFlushWait)
		select {
		case <-st.done:
		case <-t.C:
		}
		t.Stop()
	}
	if discard {
		st.discard()
	}
}

// discard publishes message.discarded for the step.
func (st *streamer) discard() {
	if st != nil {
		st.emit(wire.MessageDiscarded{TurnID: st.turn, Step: st.step})
	}
}

// merge joins consecutive deltas into pieces of about
// wire.MaxLiveTextBytes (send splits what is longer).
func merge(batch []string) []string {
	var out []string
	var cur []byte
	for _, d := range batch {
		if len(cur) > 0 && len(cur)+len(d) > wire.MaxLiveTextBytes {
			out = append(out, string(cur))
			cur = cur[:0]
		}
		cur = append(cur, d...)
	}
	if len(cur) > 0 {
		out = append(out, string(cur))
	}
	return out
}
