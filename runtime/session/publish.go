package session

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/wire"
)

// publisher appends a session's committed events to its stream (Appender),
// off the step's path: the events are durable in the record already. One
// append is in flight at a time. Only the session loop uses it.
type publisher struct {
	id     string
	app    Appender
	outbox []wire.Event // events of the last commit, stamped
	wait   chan error   // the append in flight, if any
	bytes  atomic.Int64 // bytes of the events this run appended (the index's storage hint)
}

// publish appends events of the committed outbox after the append in
// flight (if any) is done. The events are encoded in the append's own
// goroutine: the loop goes on to the next step at once.
func (p *publisher) publish(ctx context.Context, events []runtime.Event) error {
	if err := p.await(); err != nil {
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
	done := make(chan error, 1)
	p.wait = done
	go func() { // the events are durable already: append them off the step's path
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

// await waits for the append in flight. The machine requires a Publish to
// complete before the next Commit; the driver also waits before clean-up
// and shutdown. A failed append stops the session: its events stay in the
// record's outbox for the next owner.
func (p *publisher) await() error {
	if p.wait == nil {
		return nil
	}
	err := <-p.wait
	p.wait = nil
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
