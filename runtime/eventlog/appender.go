package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/wire"
	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Appender appends one session's committed events to its event subject,
// exactly once and contiguously: message ID <sessionID>/<seq>, expected last
// subject sequence, and on any uncertain or rejected append a leader read of
// the subject's last message decides (never a blind retry; docs/nats-layout.md, "NATS facts").
type Appender struct {
	js        jetstream.JetStream
	events    kv.Stream // leader reads of the events stream
	subject   string
	sessionID string
	streamSeq uint64 // stream sequence of the last event on the subject
	eventSeq  uint64 // seq of the last event on the subject
	loaded    bool
}

// NewAppender appends to subject (the session's event subject) of the events
// stream read through events. The owner appends its commits' outboxes with
// it, and the events its finishes and quarantines append outside a commit
// (session.quarantined, session.retried, session.ended {terminated}). It
// is not safe for concurrent use.
func NewAppender(js jetstream.JetStream, events kv.Stream, subject, sessionID string) *Appender {
	return &Appender{js: js, events: events, subject: subject, sessionID: sessionID}
}

// Last returns the seq of the subject's last event, read from the stream
// leader (0 for an empty subject).
func (a *Appender) Last(ctx context.Context) (uint64, error) {
	if err := a.load(ctx); err != nil {
		return 0, err
	}
	return a.eventSeq, nil
}

// load reads the subject's last event from the stream leader.
func (a *Appender) load(ctx context.Context) error {
	m, err := a.events.Last(ctx, a.subject)
	if errors.Is(err, record.ErrNotFound) {
		a.streamSeq, a.eventSeq, a.loaded = 0, 0, true
		return nil
	}
	if err != nil {
		return err
	}
	seq, err := strconv.ParseUint(m.Header.Get(wire.HeaderEventSeq), 10, 64)
	if err != nil {
		return fmt.Errorf("eventlog: event %d on %s has no %s header", m.Sequence, a.subject, wire.HeaderEventSeq)
	}
	a.streamSeq, a.eventSeq, a.loaded = m.Sequence, seq, true
	return nil
}

// Append publishes the event with per-session seq; an event already in the
// stream is skipped, so re-publishing an outbox is idempotent.
func (a *Appender) Append(ctx context.Context, seq uint64, data []byte) error {
	op := func() error { return a.try(ctx, seq, data) }
	b := backoff.WithContext(backoff.WithMaxRetries(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(20*time.Millisecond), backoff.WithMaxInterval(time.Second)), 50), ctx)
	return backoff.Retry(op, b)
}

func (a *Appender) try(ctx context.Context, seq uint64, data []byte) error {
	if !a.loaded || seq > a.eventSeq+1 { // a cached position may be stale
		if err := a.load(ctx); err != nil {
			return err
		}
	}
	switch {
	case seq <= a.eventSeq:
		return nil // already published
	case seq != a.eventSeq+1:
		return backoff.Permanent(fmt.Errorf("%w: event %d after %d on %s", kv.ErrEventGap, seq, a.eventSeq, a.subject))
	}
	ack, err := a.publish(ctx, seq, data)
	if err != nil {
		a.loaded = false // uncertain or rejected: the leader decides next time
		return err
	}
	a.streamSeq, a.eventSeq = ack.Sequence, seq
	return nil
}

func (a *Appender) publish(ctx context.Context, seq uint64, data []byte) (*jetstream.PubAck, error) {
	msg := nats.NewMsg(a.subject)
	msg.Data = data
	msg.Header.Set(wire.HeaderEventSeq, strconv.FormatUint(seq, 10))
	return a.js.PublishMsg(ctx, msg,
		jetstream.WithMsgID(a.sessionID+"/"+strconv.FormatUint(seq, 10)),
		jetstream.WithExpectLastSequencePerSubject(a.streamSeq))
}
