package memory

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/runtime/session"
)

// Events is every session's event stream in memory; Appender(id) is
// session.Appender with kv.Appender's rules: an event whose seq is already
// on the stream is skipped, one that would leave a gap is kv.ErrEventGap.
type Events struct {
	mu      sync.Mutex
	streams map[string][][]byte // by session: data of seq 1, 2, …
	// BeforeAppend, if set, runs before each append; a non-nil error is
	// returned instead (a stream that did not answer).
	BeforeAppend func(sessionID string, seq uint64) error
}

// NewEvents returns empty streams.
func NewEvents() *Events { return &Events{streams: map[string][][]byte{}} }

// Appender is the appender of one session's events.
func (e *Events) Appender(sessionID string) session.Appender { return appender{e, sessionID} }

// Stream returns a copy of a session's events, in seq order.
func (e *Events) Stream(sessionID string) [][]byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.streams[sessionID])
}

type appender struct {
	e  *Events
	id string
}

func (a appender) Append(_ context.Context, seq uint64, data []byte) error {
	if f := a.e.BeforeAppend; f != nil {
		if err := f(a.id, seq); err != nil {
			return err
		}
	}
	a.e.mu.Lock()
	defer a.e.mu.Unlock()
	s := a.e.streams[a.id]
	switch last := uint64(len(s)); {
	case seq <= last:
		return nil // already there
	case seq > last+1:
		return fmt.Errorf("%w: event %d after %d on %s", kv.ErrEventGap, seq, last, a.id)
	}
	a.e.streams[a.id] = append(s, slices.Clone(data))
	return nil
}

func (a appender) AppendAll(ctx context.Context, first uint64, data [][]byte) error {
	for i, d := range data {
		if err := a.Append(ctx, first+uint64(i), d); err != nil {
			return err
		}
	}
	return nil
}

func (a appender) Last(context.Context) (uint64, error) {
	a.e.mu.Lock()
	defer a.e.mu.Unlock()
	return uint64(len(a.e.streams[a.id])), nil
}

// Blobs is session.Blobs in memory.
type Blobs struct {
	mu   sync.Mutex
	objs map[string][]byte
}

// NewBlobs returns an empty object store.
func NewBlobs() *Blobs { return &Blobs{objs: map[string][]byte{}} }

var _ session.Blobs = (*Blobs)(nil)

func (b *Blobs) Put(_ context.Context, name string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.objs[name] = slices.Clone(data)
	return nil
}

func (b *Blobs) Has(_ context.Context, name string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.objs[name]
	return ok, nil
}

func (b *Blobs) Get(_ context.Context, name string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.objs[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", session.ErrBlobNotFound, name)
	}
	return slices.Clone(d), nil
}

func (b *Blobs) Delete(_ context.Context, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.objs, name)
	return nil
}

// Timers is session.Timers that never fires: a test publishes a timeout
// command itself when it wants one.
type Timers struct{}

// NewTimers returns timers that never fire.
func NewTimers() Timers { return Timers{} }

func (Timers) Arm(context.Context, string, runtime.Timer) error { return nil }

// ArmDebounce is Arm for the debounce window's timer.
func (Timers) ArmDebounce(context.Context, string, runtime.Timer) error { return nil }

// Cancel cancels nothing.
func (Timers) Cancel(context.Context, string) error { return nil }
