package ingress

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// event is one session event as readers pass it on: the envelope exactly
// as stored, with what SSE needs from it.
type event struct {
	seq       uint64 // the per-session event seq (SSE id)
	streamSeq uint64 // its BATON_EVENTS sequence
	kind      string // SSE event name; "" if the envelope did not validate
	data      []byte
	live      *liveStep // a live event (seq 0): message.delta or message.discarded
}

// toEvent validates a stored event's envelope (wire.DecodeEvent with no
// registry: an unknown kind's data passes through). An envelope that does
// not validate keeps its seq (from the Baton-Event-Seq header) so readers
// step over it instead of waiting for it; ok is false if not even the seq
// is known.
func toEvent(streamSeq uint64, h nats.Header, data []byte) (event, bool) {
	ev := event{streamSeq: streamSeq, data: data}
	if e, err := wire.DecodeEvent(nil, data); err == nil {
		ev.seq, ev.kind = e.Seq, e.Kind
		return ev, true
	}
	seq, err := strconv.ParseUint(h.Get(wire.HeaderEventSeq), 10, 64)
	ev.seq = seq
	return ev, err == nil && seq > 0
}

// reader reads one session's committed events from BATON_EVENTS with
// direct gets (no consumer): next message of the subject from a stream
// sequence on. It is how a client catches up to its hub, and how
// ?follow=false is answered.
type reader struct {
	stream  jetstream.Stream
	subject string
	pos     uint64 // stream sequence to read from next; 0 = not located yet
}

// errLagging reports events the stream did not return although later ones
// exist (a lagging replica answered a direct get).
var errLagging = errors.New("ingress: event stream replica lagging")

// read sends the events with seq in [from, to] (to 0: up to the newest) in
// order to fn. Every event in the range must be there: a hole is retried
// briefly, then errLagging.
func (rd *reader) read(ctx context.Context, from, to uint64, fn func(event) error) error {
	if err := rd.locate(ctx, from); err != nil {
		return err
	}
	next := from
	for to == 0 || next <= to {
		ev, found, err := rd.next(ctx)
		switch {
		case err != nil:
			return err
		case !found && to == 0:
			return nil
		case !found:
			return fmt.Errorf("%w: events %d..%d of %s not found", errLagging, next, to, rd.subject)
		case ev.seq > next:
			return fmt.Errorf("%w: event %d of %s not found (next is %d)", errLagging, next, rd.subject, ev.seq)
		}
		rd.pos = ev.streamSeq + 1
		if ev.seq < next {
			continue
		}
		if err := fn(ev); err != nil {
			return err
		}
		next++
	}
	return nil
}

// next returns the next event at or after pos. pos moves past messages
// that are not events only; the caller moves it past the event it takes.
func (rd *reader) next(ctx context.Context) (event, bool, error) {
	for {
		m, err := rd.stream.GetMsg(ctx, rd.pos, jetstream.WithGetMsgSubject(rd.subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return event{}, false, nil
		}
		if err != nil {
			return event{}, false, err
		}
		if ev, ok := toEvent(m.Sequence, m.Header, m.Data); ok {
			return ev, true, nil
		}
		rd.pos = m.Sequence + 1
	}
}

// locate sets pos to the stream sequence of the first event with seq ≥
// from, unless pos is already set: a binary search over stream sequences,
// each probe a direct get of the next message of the subject (events of one
// session are in stream order, their seqs contiguous).
func (rd *reader) locate(ctx context.Context, from uint64) error {
	if rd.pos > 0 {
		return nil
	}
	rd.pos = 1
	if from <= 1 {
		return nil
	}
	last, err := rd.stream.GetLastMsgForSubject(ctx, rd.subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if ev, ok := toEvent(last.Sequence, last.Header, last.Data); ok && ev.seq < from {
		rd.pos = last.Sequence + 1
		return nil
	}
	lo, hi := uint64(1), last.Sequence // next(hi) has seq ≥ from
	for lo < hi {
		mid := lo + (hi-lo)/2
		m, err := rd.stream.GetMsg(ctx, mid, jetstream.WithGetMsgSubject(rd.subject))
		if err != nil {
			return err
		}
		ev, ok := toEvent(m.Sequence, m.Header, m.Data)
		if !ok || ev.seq >= from {
			hi = mid
		} else {
			lo = m.Sequence + 1
		}
	}
	rd.pos = lo
	return nil
}

// readRetry is read with a few retries while a replica lags.
func (rd *reader) readRetry(ctx context.Context, from, to uint64, fn func(event) error) error {
	delay := 10 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := rd.read(ctx, from, to, func(ev event) error {
			from = ev.seq + 1
			return fn(ev)
		})
		if !errors.Is(err, errLagging) || attempt == 8 {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay *= 2
	}
}
