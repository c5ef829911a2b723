package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// floorStepStart is delivery_to_step_start_<loops>'s floor: as many raw
// loops at once, each a session's turn with the figure's harness: a
// subscription to the session's events, the command published (with its
// message ID) and delivered to a cursor-like consumer, acknowledged, the
// admission CAS — the step would start: the sample ends — then the rest
// of the turn before the next: the admission event's append, the result
// CAS, the result's five events, seen on the subscription.
func floorStepStart(ctx context.Context, e *env, r *bench.Reporter, loops, recSize int) error {
	if _, _, err := floorKV(ctx, e, "floorstep", recSize); err != nil {
		return err
	}
	defer dropFloor(ctx, e, "floorstep", "FLOORSIN", "FLOORSEV")
	owner, err := dialOwner(ctx, e, "floorstep")
	if err != nil {
		return err
	}
	defer owner.nc.Close()
	for _, s := range []string{"FLOORSIN", "FLOORSEV"} {
		if _, err := floorStream(ctx, e, s); err != nil {
			return err
		}
	}
	per := max(e.n(2000)/loops, 20)
	var mu sync.Mutex
	var samples []time.Duration
	errs := make([]error, loops)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range loops {
		wg.Go(func() {
			got, err := floorTurns(ctx, e, owner, i, per, recSize)
			mu.Lock()
			samples, errs[i] = append(samples, got...), err
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.Latencies(fmt.Sprintf("step_start_floor_%d", loops), samples, time.Since(start),
		bench.Baseline(fmt.Sprintf("js_publish_consume_rtt_%d", loops)), bench.Field("record_bytes", recSize))
	return nil
}

// floorTurns runs per+5 turns of loop i (the first five are warm-up) and
// returns the measured publish → admission samples. The bench's side (the
// publish, the subscription) uses its connection, the owner's side its own.
func floorTurns(ctx context.Context, e *env, o *ownerConn, i, per, recSize int) ([]time.Duration, error) {
	kv := o.kv
	key, in, ev := fmt.Sprintf("s%d", i), fmt.Sprintf("FLOORSIN.%d", i), fmt.Sprintf("FLOORSEV.%d", i)
	rec := make([]byte, recSize)
	rev, err := kv.Put(ctx, key, rec)
	if err != nil {
		return nil, err
	}
	cons, err := o.js.CreateConsumer(ctx, "FLOORSIN", cursorConfig(fmt.Sprintf("fs%d", i), in, 0))
	if err != nil {
		return nil, err
	}
	got := make(chan jetstream.Msg, 1)
	cc, err := cons.Consume(func(m jetstream.Msg) { got <- m }, cursorPull()...)
	if err != nil {
		return nil, err
	}
	defer cc.Stop()
	var lastEv uint64
	event := make([]byte, 250)
	samples := make([]time.Duration, 0, per)
	for t := range per + 5 {
		seen := make(chan struct{}, 8)
		sub, err := e.nc.Subscribe(ev, func(*nats.Msg) { seen <- struct{}{} })
		if err != nil {
			return samples, err
		}
		t0 := time.Now()
		if _, err := e.js.Publish(ctx, in, make([]byte, 300), jetstream.WithMsgID(fmt.Sprintf("%d-%d", i, t))); err != nil {
			return samples, err
		}
		var m jetstream.Msg
		select {
		case m = <-got:
		case <-time.After(30 * time.Second):
			return samples, fmt.Errorf("step floor %d: the command was not delivered", i)
		}
		_ = m.Ack()
		if rev, err = kv.Update(ctx, key, rec, rev); err != nil { // admission
			return samples, err
		}
		if t >= 5 {
			samples = append(samples, time.Since(t0))
		}
		if lastEv, err = floorAppend(ctx, o.js, ev, event, 1, lastEv); err != nil {
			return samples, err
		}
		if rev, err = kv.Update(ctx, key, rec, rev); err != nil { // result
			return samples, err
		}
		if lastEv, err = floorAppend(ctx, o.js, ev, event, 5, lastEv); err != nil {
			return samples, err
		}
		for range 6 {
			select {
			case <-seen:
			case <-time.After(30 * time.Second):
				return samples, fmt.Errorf("step floor %d: the turn's events were not seen", i)
			}
		}
		_ = sub.Unsubscribe()
	}
	return samples, nil
}

// floorAppend appends n events to subject after last (the first expects
// it, as a fenced batch does; the rest are pipelined) and returns the
// subject's new last sequence.
func floorAppend(ctx context.Context, js jetstream.JetStream, subject string, data []byte, n int, last uint64) (uint64, error) {
	acks := make([]jetstream.PubAckFuture, n)
	for k := range n {
		var opts []jetstream.PublishOpt
		if k == 0 {
			opts = append(opts, jetstream.WithExpectLastSequencePerSubject(last))
		}
		f, err := js.PublishAsync(subject, data, opts...)
		if err != nil {
			return last, err
		}
		acks[k] = f
	}
	for _, f := range acks {
		select {
		case ack := <-f.Ok():
			last = ack.Sequence
		case err := <-f.Err():
			return last, err
		case <-ctx.Done():
			return last, ctx.Err()
		}
	}
	return last, nil
}
