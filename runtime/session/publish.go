package session

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/baton-rt/baton/internal/failpoint"
	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// publisher appends a session's committed events to its stream (Appender),
// off the step's path: the events are durable in the record already.
// Appends run one after the other, each in a goroutine of its own that
// waits for the one before, so the loop never waits for an append to
// start the next; a commit carries the events of the appends still in
// flight in its own outbox instead of waiting for them (carry). Only the
// session loop uses it.
type publisher struct {
	id     string
	app    Appender
	fp     *failpoint.Registry // failpoint.BeforeAppend (tests)
	outbox []wire.Event        // the last commit's outbox, stamped (carried events first)
	wait   chan error          // the last append started, if not known to be done
	// unacked are the events of the appends not known to be done, in
	// order: what the next commit's outbox carries.
	unacked []wire.Event
	bytes   atomic.Int64 // bytes of the events this run appended (the index's storage hint)
}

// carryBytes bounds the events a commit carries for the appends in flight
// (their data, as the machine estimates a boundary's events): beyond it
// the commit waits for them, as every commit did before.
const carryBytes = 16 << 10

// publish appends events of the committed outbox after the appends started
// before (it does not wait for them). The events are encoded in the
// append's own goroutine: the loop goes on to the next step at once.
func (p *publisher) publish(ctx context.Context, events []runtime.Event) error {
	if err := p.collect(); err != nil {
		return err
	}
	batch := make([]wire.Event, 0, len(events))
	for _, e := range events {
		we, ok := p.stamped(e)
		if !ok {
			return fmt.Errorf("session %s: event %d is not in the committed outbox", p.id, e.Seq)
		}
		batch = append(batch, we)
	}
	for _, we := range batch { // a re-publication repeats events in flight
		if n := len(p.unacked); n == 0 || we.Seq > p.unacked[n-1].Seq {
			p.unacked = append(p.unacked, we)
		}
	}
	prev, done := p.wait, make(chan error, 1)
	p.wait = done
	go func() { // the events are durable already: append them off the step's path
		if prev != nil {
			if err := <-prev; err != nil {
				done <- err // a gap is never appended past
				return
			}
		}
		if err := p.fp.Eval(failpoint.BeforeAppend, failpoint.Args{SessionID: p.id, Detail: strconv.FormatUint(batch[0].Seq, 10)}); err != nil {
			done <- err
			return
		}
		done <- p.append(ctx, batch)
	}()
	return nil
}

// append encodes a batch and appends it in order (runs of consecutive
// seqs at once: a commit's events are one run).
func (p *publisher) append(ctx context.Context, batch []wire.Event) error {
	data := make([][]byte, 0, len(batch))
	for i, we := range batch {
		// Envelope only: the data was validated once, when the step's result
		// was checked, and a committed event of a data version newer than
		// this build knows is re-published unchanged.
		d, err := wire.EncodeEvent(nil, we)
		if err != nil {
			return fmt.Errorf("session %s: %w", p.id, err)
		}
		data = append(data, d)
		if i == len(batch)-1 || batch[i+1].Seq != we.Seq+1 {
			first := we.Seq + 1 - uint64(len(data))
			if err := p.app.AppendAll(ctx, first, data); err != nil {
				return err
			}
			for _, d := range data {
				p.bytes.Add(int64(len(d)))
			}
			data = data[:0]
		}
	}
	return nil
}

// carry returns the events of the appends still in flight, which the
// next commit's outbox must keep (that commit replaces the record's
// outbox: an event it dropped before its append landed would be lost with
// this owner), or waits for them when they are more than carryBytes and
// returns none. A failed append stops the session: its events stay in the
// record's outbox for the next owner.
func (p *publisher) carry() ([]wire.Event, error) {
	if err := p.collect(); err != nil || p.wait == nil {
		return nil, err
	}
	n := 0
	for _, e := range p.unacked {
		n += len(e.Data) + eventOverhead
	}
	if n > carryBytes {
		return nil, p.await()
	}
	return slices.Clone(p.unacked), nil
}

// eventOverhead is an event's envelope as stored, beside its data.
const eventOverhead = 256

// collect notes the appends in flight that are done, without waiting.
func (p *publisher) collect() error {
	if p.wait == nil {
		return nil
	}
	select {
	case err := <-p.wait:
		return p.done(err)
	default:
		return nil
	}
}

// await waits for the appends in flight: before a commit whose outbox
// cannot carry them, before clean-up, hibernation and shutdown. A failed
// append stops the session: its events stay in the record's outbox for
// the next owner.
func (p *publisher) await() error {
	if p.wait == nil {
		return nil
	}
	return p.done(<-p.wait)
}

// done records the end of every append in flight (the last one's result
// is the first failure of the chain, if any).
func (p *publisher) done(err error) error {
	p.wait, p.unacked = nil, nil
	if err != nil {
		return fmt.Errorf("session %s: publish events: %w", p.id, err)
	}
	return nil
}

func (p *publisher) stamped(e runtime.Event) (wire.Event, bool) {
	for _, w := range p.outbox {
		if w.Seq == e.Seq {
			return w, true
		}
	}
	return wire.Event{}, false
}
