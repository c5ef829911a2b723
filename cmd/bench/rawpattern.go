package main

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

type rawPattern struct {
	e       *env
	kv      jetstream.KeyValue
	revs    []uint64
	lastEvt []uint64
}

func newRawPattern(ctx context.Context, e *env, sessions int) (*rawPattern, error) {
	for _, name := range []string{"RAWIN", "RAWEV"} {
		if _, err := e.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage, Retention: jetstream.LimitsPolicy,
		}); err != nil {
			return nil, err
		}
	}
	kv, err := e.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "rawsessions", History: 8, Storage: jetstream.FileStorage})
	if err != nil {
		return nil, err
	}
	p := &rawPattern{e: e, kv: kv, revs: make([]uint64, sessions), lastEvt: make([]uint64, sessions)}
	rec := make([]byte, 1200) // about a small session record
	for s := range sessions {
		if p.revs[s], err = kv.Put(ctx, fmt.Sprintf("s%d", s), rec); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// delivery performs one delivery's writes for session s.
func (p *rawPattern) delivery(ctx context.Context, s int, per writeCounts) error {
	payload := make([]byte, 300)
	if _, err := p.e.js.Publish(ctx, fmt.Sprintf("RAWIN.s%d", s), payload); err != nil {
		return err
	}
	rec := make([]byte, 1200)
	for range per.records {
		rev, err := p.kv.Update(ctx, fmt.Sprintf("s%d", s), rec, p.revs[s])
		if err != nil {
			return err
		}
		p.revs[s] = rev
	}
	evt := make([]byte, 250)
	for range per.events {
		ack, err := p.e.js.Publish(ctx, fmt.Sprintf("RAWEV.s%d", s), evt, jetstream.WithExpectLastSequencePerSubject(p.lastEvt[s]))
		if err != nil {
			return err
		}
		p.lastEvt[s] = ack.Sequence
	}
	return nil
}
