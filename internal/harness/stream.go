package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Events reads the session's whole public stream straight from JetStream
// (an ordered consumer; no ingress involved).
func (e *Env) Events(ctx context.Context, sessionID string) ([]wire.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cons, err := e.JS.OrderedConsumer(ctx, e.Names.EventsStream(), jetstream.OrderedConsumerConfig{FilterSubjects: []string{e.Names.Events(sessionID)}})
	if err != nil {
		return nil, fmt.Errorf("events of %s: %w", sessionID, err)
	}
	var out []wire.Event
	for {
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			return nil, fmt.Errorf("events of %s: %w", sessionID, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			ev, err := wire.DecodeEvent(nil, m.Data())
			if err != nil {
				return nil, fmt.Errorf("event does not decode: %w", err)
			}
			out = append(out, ev)
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("events of %s: %w", sessionID, err)
		}
		if n == 0 {
			return out, nil
		}
	}
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
