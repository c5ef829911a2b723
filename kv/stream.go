package kv

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

// Stream is leader reads of one JetStream stream: the message the stream
// leader holds, never an older one a lagging replica might serve. Each read
// is sent under js's API prefix or domain and waits out a stream without a
// leader (a few seconds after a node dies) until ctx's deadline, or the
// jetstream default timeout when ctx has none. No such message is
// record.ErrNotFound. A Stream holds no mutable state.
type Stream struct {
	l leader
}

// NewStream returns the leader reads of the stream named name, sent on js's
// connection.
func NewStream(js jetstream.JetStream, name string) Stream {
	return Stream{l: newLeader(js, name)}
}

// Get returns the message at sequence seq.
func (s Stream) Get(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	if err := s.check(seq == 0, "message at sequence 0"); err != nil {
		return nil, err
	}
	return s.l.get(ctx, msgGetRequest{Seq: seq})
}

// Last returns the newest message on subject (a filter may hold wildcards).
func (s Stream) Last(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	if err := s.check(subject == "", "last message without a subject"); err != nil {
		return nil, err
	}
	return s.l.get(ctx, msgGetRequest{LastFor: subject})
}

// Next returns the first message on subject at or after sequence from.
func (s Stream) Next(ctx context.Context, subject string, from uint64) (*jetstream.RawStreamMsg, error) {
	if err := s.check(subject == "", "next message without a subject"); err != nil {
		return nil, err
	}
	return s.l.get(ctx, msgGetRequest{Seq: from, NextFor: subject})
}

func (s Stream) check(bad bool, what string) error {
	switch {
	case s.l.nc == nil || s.l.stream == "":
		return invalid("leader read of a zero Stream (use NewStream)")
	case bad:
		return invalid("leader read of %s: %s", s.l.stream, what)
	}
	return nil
}

// Backlog answers the handoff's backlog check (it implements
// handoff.Backlog) over the inbox stream, by leader reads: a lagging
// replica could hide a command that arrived before staging.
type Backlog struct {
	inbox Stream
	names subjects.Names
}

// NewBacklog returns the backlog check over names' inbox stream, read on
// js's connection.
func NewBacklog(js jetstream.JetStream, names subjects.Names) Backlog {
	return Backlog{inbox: NewStream(js, names.InboxStream()), names: names}
}

// After returns the lowest sequence above seq stored on any of the tokens'
// inbox subjects, or 0 when there is none: one leader read (the first
// message on the subject from seq+1) per token.
func (b Backlog) After(ctx context.Context, tokens []string, seq uint64) (uint64, error) {
	if b.names == (subjects.Names{}) {
		return 0, invalid("backlog check of a zero Backlog (use NewBacklog)")
	}
	var first uint64
	for _, tok := range tokens {
		m, err := b.inbox.Next(ctx, b.names.Inbox(tok), seq+1)
		switch {
		case errors.Is(err, record.ErrNotFound):
			continue
		case err != nil:
			return 0, fmt.Errorf("kv: backlog of %s: %w", b.names.Inbox(tok), err)
		}
		if first == 0 || m.Sequence < first {
			first = m.Sequence
		}
	}
	return first, nil
}
