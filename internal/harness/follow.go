package harness

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/baton-rt/baton/wire"
)

// Follow is what a Follower follows: one session's events, over SSE, on
// the ingress Base names at each (re)connection.
type Follow struct {
	Session string
	// Base returns the ingress to connect to and a label for it (its
	// deployment), asked at every connection.
	Base func() (url, label string)
	// Pause between a stream's end and the next connection (default 100
	// ms), as an EventSource's retry.
	Pause  time.Duration
	Client *http.Client // default: one without a timeout
}

// Follower is an SSE client of one session from seq 0 that, whenever its
// stream ends (an ingress stops, NATS hiccups), reconnects with
// Last-Event-ID. It keeps each event whose id, kind and seq continue the
// stream, and records anything else as a problem.
type Follower struct {
	cfg      Follow
	mu       sync.Mutex
	evs      []wire.Event
	connects []string
	problems []string
	done     chan struct{}
}

// StartFollow starts following until ctx ends.
func StartFollow(ctx context.Context, cfg Follow) *Follower {
	if cfg.Pause == 0 {
		cfg.Pause = 100 * time.Millisecond
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{}
	}
	f := &Follower{cfg: cfg, done: make(chan struct{})}
	go f.run(ctx)
	return f
}

func (f *Follower) run(ctx context.Context) {
	defer close(f.done)
	for ctx.Err() == nil {
		base, label := f.cfg.Base()
		f.mu.Lock()
		last := uint64(len(f.evs))
		f.connects = append(f.connects, label)
		f.mu.Unlock()
		_ = f.stream(ctx, base, last) // an ended stream is resumed
		if ctx.Err() != nil {
			return
		}
		Sleep(ctx, f.cfg.Pause)
	}
}

func (f *Follower) stream(ctx context.Context, base string, last uint64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/sessions/"+f.cfg.Session+"/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatUint(last, 10))
	}
	resp, err := f.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("SSE %d", resp.StatusCode)
	}
	return ReadFrames(resp.Body, func(fr Frame) bool { f.add(fr); return true }, nil)
}

func (f *Follower) add(fr Frame) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !fr.HasID {
		// A live event (message.delta, message.discarded, task.progress):
		// no seq, never a cursor. It must be a live event.
		if _, err := wire.DecodeLive([]byte(fr.Data)); err != nil {
			f.problems = append(f.problems, fmt.Sprintf("a frame without id: that is no live event: %v", err))
		}
		return
	}
	ev, err := wire.DecodeEvent(nil, []byte(fr.Data))
	if err != nil {
		f.problems = append(f.problems, fmt.Sprintf("id %d: data does not decode: %v", fr.ID, err))
		return
	}
	want := uint64(len(f.evs) + 1)
	if fr.ID != ev.Seq || fr.Event != ev.Kind || ev.Seq != want {
		f.problems = append(f.problems, fmt.Sprintf("got id %d event %s (envelope seq %d kind %s), want seq %d", fr.ID, fr.Event, ev.Seq, ev.Kind, want))
		return
	}
	f.evs = append(f.evs, ev)
}

// Session is the session followed.
func (f *Follower) Session() string { return f.cfg.Session }

// Snapshot returns the events kept, the label of each connection's ingress
// and the problems, so far.
func (f *Follower) Snapshot() (evs []wire.Event, connects, problems []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.evs), slices.Clone(f.connects), slices.Clone(f.problems)
}

// Done is closed when the follower has stopped (its context ended).
func (f *Follower) Done() <-chan struct{} { return f.done }
