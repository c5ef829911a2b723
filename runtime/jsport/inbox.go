package jsport

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-rt/baton/internal/stages"
	"github.com/baton-rt/baton/kv"
	"github.com/baton-rt/baton/runtime/session"
	"github.com/baton-rt/baton/subjects"
	"github.com/nats-io/nats.go/jetstream"
)

// Inbox is session.Inbox on JetStream: a session's cursor over its
// merged FIFO is consumer <sessionID>-<epoch> on the inbox stream, filtered
// on every token of the session, in stream order. The consumer is a
// disposable cursor: the truth is Applied in the session record, and the
// consumer is (re)created at Applied.Next. AckExplicit with one message in
// flight keeps delivery in stream order even when a message is lost in
// flight and redelivered.
type Inbox struct {
	JS    jetstream.JetStream
	Names subjects.Names
}

var _ session.Inbox = Inbox{}

// reader is one open consumer, read by the library's Consume: its
// messages reach handle through an asynchronous subscription, whose queue
// has no small bound. (The library's iterator gives its subscription a
// channel of one message per pull: a heartbeat and a message arriving
// together — a burst after any stall on a loaded machine — overflowed it,
// the library dropped the message, and the session waited an ack wait for
// its redelivery.)
type reader struct {
	cc   jetstream.ConsumeContext
	cons jetstream.Consumer
	out  chan session.Delivery
	stop chan struct{}
	// lost receives the error that ended delivery unexpectedly (consumer
	// deleted, heartbeats missed after a server restart...); never closed.
	lost chan error
	key  string // the session ID, for the stage marks (internal/stages)

	mu       sync.Mutex   // held by handle while it runs; Close takes it to wait for one running
	closed   bool         // set by Close: handle delivers nothing more
	checking atomic.Bool  // an alive check is under way
	missed   atomic.Int64 // when the last heartbeat window was missed (unix ns)
}

// missesApart: two missed heartbeat windows at most this far apart are
// consecutive (a window is two heartbeats, 2 s; the library reports each
// missed one).
const missesApart = 3 * inboxHeartbeat

func (r *reader) Deliveries() <-chan session.Delivery { return r.out }
func (r *reader) Lost() <-chan error                  { return r.lost }

const (
	inboxPullExpiry  = 5 * time.Second
	inboxHeartbeat   = time.Second
	consumerInactive = 10 * time.Minute
	consumerAckWait  = 5 * time.Second
)

func (ib Inbox) config(c session.Cursor) jetstream.ConsumerConfig {
	filters := make([]string, len(c.Tokens))
	for i, t := range c.Tokens {
		filters[i] = ib.Names.Inbox(t)
	}
	cfg := jetstream.ConsumerConfig{
		Durable: c.Name, FilterSubjects: filters,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: consumerAckWait, MaxAckPending: 1,
		DeliverPolicy: jetstream.DeliverAllPolicy, InactiveThreshold: consumerInactive,
		MemoryStorage: true, Replicas: 1,
	}
	if c.Start > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, c.Start
	}
	return cfg
}

// Open (re)creates the consumer at c.Start and starts delivering. A fresh
// cursor's name <id>-<epoch> is new: the epoch was just claimed by this
// run's CAS, and no other run ever uses it. It is created first and deleted
// only if the name exists after all (a create with an identical
// configuration returns the existing consumer: one that has delivered
// anything is not a fresh cursor), which saves the delete's round trip on
// the way to the first step.
func (ib Inbox) Open(ctx context.Context, c session.Cursor) (session.Reader, error) {
	stream := ib.Names.InboxStream()
	var cons jetstream.Consumer
	if c.Fresh {
		cc, err := ib.create(ctx, stream, ib.config(c))
		if err == nil && unused(cc) {
			cons = cc
		} else if err != nil && !errors.Is(err, jetstream.ErrConsumerExists) {
			return nil, fmt.Errorf("jsport: create consumer %s: %w", c.Name, err)
		}
	}
	if cons == nil {
		if err := attempts(ctx, func(actx context.Context) error { return ib.Delete(actx, c.Name) }); err != nil {
			return nil, err
		}
		cc, err := ib.create(ctx, stream, ib.config(c))
		if err != nil {
			return nil, fmt.Errorf("jsport: create consumer %s: %w", c.Name, err)
		}
		cons = cc
	}
	// A pull request that is lost (a consumer created just as its stream
	// was born, a route flap, or — the common case — a fresh consumer
	// whose server's interest in its pull subject has not reached this
	// connection's server yet, as after every handoff and claim) is only
	// noticed when two idle heartbeats are missed: inboxHeartbeat bounds
	// that stall to 2 s (the default, expiry/2, made it 5 s; the chaos test
	// saw about one handoff in fifty wait for it). The price is one idle
	// heartbeat a second per live session.
	r := &reader{cons: cons, out: make(chan session.Delivery, readerBuffer), stop: make(chan struct{}),
		lost: make(chan error, 1)}
	if stages.Enabled {
		r.key = c.Name[:max(strings.LastIndexByte(c.Name, '-'), 0)]
	}
	cc, err := cons.Consume(r.handle, jetstream.PullMaxMessages(1), jetstream.PullExpiry(inboxPullExpiry),
		jetstream.PullHeartbeat(inboxHeartbeat), jetstream.ConsumeErrHandler(r.failed))
	if err != nil {
		return nil, fmt.Errorf("jsport: consume %s: %w", c.Name, err)
	}
	r.cc = cc
	return r, nil
}

// Bounds of a consumer create or delete, and of a blob put: a stream whose
// leader's node died answers none until its election (seconds), and a
// request sent into that window is lost, so each attempt waits
// consumerAttempt and the request is sent again — until consumerWait, or
// ctx's deadline if it has one. Sending it again is safe: a create with an
// identical configuration returns the consumer an earlier attempt made, a
// delete of a consumer gone is no error, and a blob is content-addressed.
const (
	consumerAttempt = 2 * time.Second
	consumerWait    = 20 * time.Second
	consumerPause   = 100 * time.Millisecond
)

// create creates the consumer (attempts).
func (ib Inbox) create(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	var cons jetstream.Consumer
	err := attempts(ctx, func(actx context.Context) error {
		var err error
		cons, err = ib.JS.CreateConsumer(actx, stream, cfg)
		return err
	})
	return cons, err
}

// attempts runs op with a deadline of consumerAttempt each, again while
// an attempt timed out or the stream had no leader to answer it, until
// ctx's deadline (consumerWait when it has none).
func attempts(ctx context.Context, op func(context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, consumerWait)
		defer cancel()
	}
	for {
		actx, cancel := context.WithTimeout(ctx, consumerAttempt)
		err := op(actx)
		timedOut := actx.Err() != nil
		cancel()
		if err == nil || ctx.Err() != nil || !timedOut && !leaderless(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(consumerPause):
		}
	}
}

// leaderless reports an answer that means "no leader to answer yet".
func leaderless(err error) bool { return kv.Leaderless(err) }

// readerBuffer is how many delivered messages a reader holds for its
// session (each is acknowledged once buffered: the record, not the
// consumer, says what was processed).
const readerBuffer = 64

// unused reports whether a consumer has never delivered a message (nor
// has a client waiting on it): then it is the cursor a create would make.
func unused(c jetstream.Consumer) bool {
	i := c.CachedInfo()
	return i != nil && i.Delivered.Consumer == 0 && i.AckFloor.Consumer == 0 && i.NumAckPending == 0 &&
		i.NumRedelivered == 0 && i.NumWaiting == 0
}

// handle acknowledges a message and hands it to the session. It runs on
// the subscription's goroutine, one message at a time; while the session's
// buffer is full it waits, and the library asks for the next message only
// once it returns.
func (r *reader) handle(msg jetstream.Msg) {
	stages.Mark(r.key, "pulled")
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	meta, err := msg.Metadata()
	if err != nil {
		return
	}
	_ = msg.Ack()
	select {
	case r.out <- session.Delivery{Seq: meta.Sequence.Stream, Data: msg.Data(), Stored: meta.Timestamp}:
	case <-r.stop:
	}
}

// failed is the consume's error handler. A consumer deleted, a request
// the server refuses and a closed connection end delivery (the library
// stops consuming); missed heartbeats end it only if the consumer no
// longer answers after a second window in a row (alive; the library has
// asked again after each). Other statuses (a leader change) are the
// library's to recover from.
func (r *reader) failed(cc jetstream.ConsumeContext, err error) {
	switch {
	case errors.Is(err, jetstream.ErrNoHeartbeat):
		now := time.Now().UnixNano()
		last := r.missed.Swap(now)
		if now-last > int64(missesApart) {
			return // a first window missed: the library's new pull is the cure
		}
		if !r.checking.CompareAndSwap(false, true) {
			return // a check is under way
		}
		go func() {
			defer r.checking.Store(false)
			if !r.alive() {
				r.lose(err)
				cc.Stop()
			}
		}()
	case errors.Is(err, jetstream.ErrConsumerDeleted), errors.Is(err, jetstream.ErrBadRequest),
		errors.Is(err, jetstream.ErrConnectionClosed):
		r.lose(err)
	}
}

// lose reports err on Lost unless the session closed the reader.
func (r *reader) lose(err error) {
	select {
	case <-r.stop:
		return
	default:
	}
	select {
	case r.lost <- err:
	default: // one loss is reported
	}
}

// alive reports whether the consumer still answers after two consecutive
// windows of two heartbeats with neither a message nor a heartbeat. The
// library has sent a new pull after each: windows missed because this
// process or its server stalled (a loaded machine), or because a pull was
// lost, cost the windows and nothing else. Only a consumer that is gone
// or does not answer within consumerAttempt loses the reader (a consumer
// deleted while it is read ends it at once, by the server's status). The
// checks of a process's readers are not queued behind each other: after
// a node's restart many consumers are gone at once, and each check of a
// gone one waits its whole attempt.
func (r *reader) alive() bool {
	ctx, cancel := context.WithTimeout(context.Background(), consumerAttempt)
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err := r.cons.Info(ctx)
	return err == nil
}

// Close stops delivery (the consumer stays until Delete or its inactivity
// threshold).
func (r *reader) Close() {
	close(r.stop)
	r.cc.Stop()
	r.mu.Lock() // a running handle returns: stop is closed
	r.closed = true
	r.mu.Unlock()
}

var _ session.MessageReader = Inbox{}

// Read returns the message at seq, by a direct get (kv.Stream.Direct), if
// it is on one of tokens' subjects (a handoff's successor reads its
// trigger so). A message on another subject is ErrNotTheSessions; none
// here (a replica that lacks it yet, or no such message) wraps
// record.ErrNotFound.
func (ib Inbox) Read(ctx context.Context, tokens []string, seq uint64) (session.Delivery, error) {
	m, err := kv.NewStream(ib.JS, ib.Names.InboxStream()).Direct(ctx, seq)
	if err != nil {
		return session.Delivery{}, err
	}
	for _, t := range tokens {
		if m.Subject == ib.Names.Inbox(t) {
			return session.Delivery{Seq: m.Sequence, Data: m.Data, Stored: m.Time}, nil
		}
	}
	return session.Delivery{}, fmt.Errorf("%w: message %d is on %s", ErrNotTheSessions, seq, m.Subject)
}

// Exists reports whether the consumer exists.
func (ib Inbox) Exists(ctx context.Context, name string) (bool, error) {
	_, err := ib.JS.Consumer(ctx, ib.Names.InboxStream(), name)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return false, nil
	}
	return false, err
}

// Delete deletes the consumer; a missing one is not an error.
func (ib Inbox) Delete(ctx context.Context, name string) error {
	err := ib.JS.DeleteConsumer(ctx, ib.Names.InboxStream(), name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("jsport: delete consumer %s: %w", name, err)
	}
	return nil
}

// Forget deletes the messages at seqs from the inbox stream; one already
// gone (deleted, purged) is not an error.
func (ib Inbox) Forget(ctx context.Context, seqs []uint64) error {
	stream, err := ib.JS.Stream(ctx, ib.Names.InboxStream())
	if err != nil {
		return err
	}
	for _, seq := range seqs {
		if err := stream.DeleteMsg(ctx, seq); err != nil && !gone(ctx, stream, seq) {
			return fmt.Errorf("jsport: delete inbox message %d: %w", seq, err)
		}
	}
	return nil
}

// gone reports a message the stream no longer holds (a failed delete names
// the cause only in its text).
func gone(ctx context.Context, stream jetstream.Stream, seq uint64) bool {
	_, err := stream.GetMsg(ctx, seq)
	return errors.Is(err, jetstream.ErrMsgNotFound)
}

// Purge purges the messages below seq on each token's inbox subject.
func (ib Inbox) Purge(ctx context.Context, tokens []string, below uint64) error {
	stream, err := ib.JS.Stream(ctx, ib.Names.InboxStream())
	if err != nil {
		return err
	}
	for _, t := range tokens {
		if err := stream.Purge(ctx, jetstream.WithPurgeSubject(ib.Names.Inbox(t)), jetstream.WithPurgeSequence(below)); err != nil {
			return err
		}
	}
	return nil
}
