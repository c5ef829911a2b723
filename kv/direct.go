package kv

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/nats-io/nats.go/jetstream"
)

// Direct returns the message at sequence seq by a direct get, which the
// server answers outside its queue of JetStream API requests (a leader
// read waits there behind consumer creations, for example) and which any
// current replica may answer. For a message read by its sequence a
// lagging replica can only lack it, never hold another one: so a message
// returned is the stream's, and record.ErrNotFound means "not here", not
// "not in the stream" (read the leader, Get, to know). One request,
// bounded like one leader read, never sent again.
func (s Stream) Direct(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	if err := s.check(seq == 0, "message at sequence 0"); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.l.try)
	defer cancel()
	subject := s.l.prefix + "DIRECT.GET." + s.l.stream
	r, err := s.l.nc.RequestWithContext(ctx, subject, append(strconv.AppendUint([]byte(`{"seq":`), seq, 10), '}'))
	if err != nil {
		return nil, fmt.Errorf("kv: direct get %s %d: %w", s.l.stream, seq, err)
	}
	if status := r.Header.Get("Status"); status != "" {
		if status == "404" {
			return nil, fmt.Errorf("kv: direct get %s %d: %w", s.l.stream, seq, record.ErrNotFound)
		}
		return nil, fmt.Errorf("kv: direct get %s %d: status %s %s", s.l.stream, seq, status, r.Header.Get("Description"))
	}
	got, err := strconv.ParseUint(r.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil || got != seq {
		return nil, fmt.Errorf("kv: direct get %s %d: answered with sequence %q", s.l.stream, seq, r.Header.Get(jetstream.SequenceHeader))
	}
	tm, err := time.Parse(time.RFC3339Nano, r.Header.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return nil, fmt.Errorf("kv: direct get %s %d: timestamp: %w", s.l.stream, seq, err)
	}
	return &jetstream.RawStreamMsg{Subject: r.Header.Get(jetstream.SubjectHeader), Sequence: got, Header: r.Header,
		Data: r.Data, Time: tm}, nil
}
