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
	batches   *Batches      // nil: one event at a time
	retryWait time.Duration // the first wait between tries (0: retryInitial)
}

// WithBatches lets AppendAll send a commit's events as one fast batch
// (batch.go) through b; a nil b keeps one publish per event. It returns a.
func (a *Appender) WithBatches(b *Batches) *Appender {
	a.batches = b
	return a
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
	return a.retry(ctx, func() error { return a.try(ctx, seq, data) })
}

// retryInitial is the first wait between two tries of an append.
const retryInitial = 20 * time.Millisecond

// retry runs op until it succeeds, fails permanently, or 50 tries passed.
// A try the fence refused because the subject is not where this appender
// thought (another writer appended first — a stale owner, or a source
// whose append of its last outbox landed before its successor's copy —
// or, after a batch of events already there, the position kept from that
// batch's reply) is tried again at once: the refusal is an answer, not an
// uncertain outcome, and the try begins with the leader read that decides
// what is left to append. Without it such a try waited retryInitial (10–30
// ms with its jitter): 6 of 205 handoffs in one run of the handoff bench.
func (a *Appender) retry(ctx context.Context, op func() error) error {
	wait := a.retryWait
	if wait <= 0 {
		wait = retryInitial
	}
	b := backoff.WithContext(backoff.WithMaxRetries(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(wait), backoff.WithMaxInterval(max(time.Second, wait))), 50), ctx)
	return backoff.Retry(func() error {
		err := op()
		if wrongLast(err) {
			err = op()
		}
		return err
	}, b)
}

// wrongLast reports the fence's refusal: the subject's last message is not
// the one the append expected (10071 on a single server, 10164 on a
// replicated stream), from a batch's reply or a single publish.
func wrongLast(err error) bool {
	var code int
	var re *replyErr
	var api *jetstream.APIError
	switch {
	case errors.As(err, &re):
		code = re.ErrCode
	case errors.As(err, &api):
		code = int(api.ErrorCode)
	default:
		return false
	}
	return code == int(jetstream.JSErrCodeStreamWrongLastSequence) || code == int(jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// AppendAll appends data[i] as the event with seq first+i, in order, as
// Append does each (those already on the subject are skipped, a gap is
// refused): with Batches, the events not yet there go out as one fast
// batch, one round trip for the commit; otherwise one at a time.
func (a *Appender) AppendAll(ctx context.Context, first uint64, data [][]byte) error {
	if a.batches == nil || len(data) < 2 {
		for i, d := range data {
			if err := a.Append(ctx, first+uint64(i), d); err != nil {
				return err
			}
		}
		return nil
	}
	return a.retry(ctx, func() error { return a.tryAll(ctx, first, data) })
}

// batchReplyWait bounds the wait for a batch's final reply: past it the
// outcome is uncertain and the leader decides, as for a lost PubAck.
const batchReplyWait = 5 * time.Second

func (a *Appender) tryAll(ctx context.Context, first uint64, data [][]byte) error {
	if !a.loaded || first > a.eventSeq+1 { // a cached position may be stale
		if err := a.load(ctx); err != nil {
			return err
		}
	}
	last := first + uint64(len(data)) - 1
	switch {
	case last <= a.eventSeq:
		return nil // all published already
	case first > a.eventSeq+1:
		return backoff.Permanent(fmt.Errorf("%w: event %d after %d on %s", kv.ErrEventGap, first, a.eventSeq, a.subject))
	}
	from := a.eventSeq + 1
	rest := data[from-first:]
	if len(rest) == 1 || a.batches.off.Load() {
		return a.tryEach(ctx, from, rest)
	}
	bctx, cancel := context.WithTimeout(ctx, batchReplyWait)
	n, streamSeq, err := a.batches.send(bctx, a.subject, a.sessionID, a.streamSeq, from, rest)
	cancel()
	if n > 0 {
		a.streamSeq, a.eventSeq = streamSeq, from+uint64(n)-1
	}
	if errors.Is(err, errBatchesOff) {
		return a.tryEach(ctx, from, rest) // refused as a batch, not by its fence
	}
	if err != nil {
		a.loaded = false // uncertain or rejected: the leader decides next time
		return err
	}
	return nil
}

// tryEach is try for data[i] as event from+i, one after another.
func (a *Appender) tryEach(ctx context.Context, from uint64, data [][]byte) error {
	for i, d := range data {
		if err := a.try(ctx, from+uint64(i), d); err != nil {
			return err
		}
	}
	return nil
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
