package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Events reads the session's whole public stream straight from JetStream
// (no ingress involved). Waits call it every Interval, so it reads only
// what changed since its last read of the session: two leader reads
// (kv.Stream: the subject's first and last sequence) and, when the last has moved, an ordered consumer from the
// last event read on. A stream whose first event changed (a delete, a
// purge) is read whole again. Events are never removed from the middle
// of a session's subject, so the two ends tell whether it changed.
func (e *Env) Events(ctx context.Context, sessionID string) ([]wire.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, subject := e.Names.EventsStream(), e.Names.Events(sessionID)
	leader := kv.NewStream(e.JS, stream) // a follower's direct get may be behind
	last, err := seqOf(leader.Last(ctx, subject))
	if err != nil {
		return nil, fmt.Errorf("events of %s: %w", sessionID, err)
	}
	first, err := seqOf(leader.Next(ctx, subject, 1))
	if err != nil {
		return nil, fmt.Errorf("events of %s: %w", sessionID, err)
	}
	e.eventsMu.Lock()
	prev := e.events[sessionID]
	e.eventsMu.Unlock()
	if last == 0 || first == 0 {
		e.remember(sessionID, nil)
		return nil, nil
	}
	if prev == nil || prev.first != first || last < prev.last {
		prev = nil // read whole
	} else if last == prev.last {
		return slices.Clone(prev.events), nil
	}
	read := &eventsRead{}
	from := uint64(1)
	if prev != nil {
		*read = eventsRead{first: prev.first, last: prev.last, events: slices.Clone(prev.events)}
		from = prev.last + 1
	}
	if err := e.readEvents(ctx, stream, subject, from, read); err != nil {
		return nil, fmt.Errorf("events of %s: %w", sessionID, err)
	}
	e.remember(sessionID, read)
	return slices.Clone(read.events), nil
}

// eventsRead is what Events last read of one session: its events and the
// stream sequences of the first and the last.
type eventsRead struct {
	first, last uint64
	events      []wire.Event
}

// remember keeps r as the last read of the session (nil: none).
func (e *Env) remember(sessionID string, r *eventsRead) {
	e.eventsMu.Lock()
	defer e.eventsMu.Unlock()
	if r == nil || len(r.events) == 0 {
		delete(e.events, sessionID)
		return
	}
	if e.events == nil {
		e.events = map[string]*eventsRead{}
	}
	e.events[sessionID] = r
}

// readEvents appends to r the events of subject from stream sequence from
// on, through an ordered consumer that the server removes soon after.
func (e *Env) readEvents(ctx context.Context, stream, subject string, from uint64, r *eventsRead) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, InactiveThreshold: 30 * time.Second}
	if from > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := e.JS.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return err
	}
	for {
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			return err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			ev, err := wire.DecodeEvent(nil, m.Data())
			if err != nil {
				return fmt.Errorf("event does not decode: %w", err)
			}
			meta, err := m.Metadata()
			if err != nil {
				return err
			}
			if r.first == 0 {
				r.first = meta.Sequence.Stream
			}
			r.last = meta.Sequence.Stream
			r.events = append(r.events, ev)
		}
		if err := batch.Error(); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
	}
}

// seqOf is the stream sequence of the message a leader read found, 0 if
// there is none.
func seqOf(m *jetstream.RawStreamMsg, err error) (uint64, error) {
	switch {
	case errors.Is(err, record.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	}
	return m.Sequence, nil
}

// WaitEvents polls the session's events (Events; a failed read is retried)
// until pred holds for them. On timeout the error shows what the stream
// holds: kinds, outputs and the applied commands.
func (e *Env) WaitEvents(ctx context.Context, sessionID string, timeout time.Duration, what string, pred func([]wire.Event) bool) ([]wire.Event, error) {
	return WaitEvents(ctx, timeout, what, func() ([]wire.Event, error) { return e.Events(ctx, sessionID) }, pred)
}

// WaitEvents polls read until pred holds for the events it returns; a
// failed read is retried. The timeout error describes the last events read.
func WaitEvents(ctx context.Context, timeout time.Duration, what string, read func() ([]wire.Event, error), pred func([]wire.Event) bool) ([]wire.Event, error) {
	var evs []wire.Event
	var rerr error
	err := Poll(ctx, timeout, func() bool {
		got, err := read()
		if rerr = err; err != nil {
			return false
		}
		evs = got
		return pred(evs)
	})
	if err != nil {
		return evs, fmt.Errorf("%w waiting for %s; events %s; outputs %q; applied %v; last read error %v",
			err, what, Kinds(evs), Outputs(evs), AppliedIDs(evs), rerr)
	}
	return evs, nil
}
