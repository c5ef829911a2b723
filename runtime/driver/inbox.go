package driver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/baton-rt/baton/runtime"
	"github.com/baton-rt/baton/subjects"
	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// inbox is a session's cursor over its merged FIFO: consumer
// <sessionID>-<epoch> on the inbox stream, filtered on every token of the
// session, in stream order. The consumer is a disposable cursor: the truth is
// Applied in the session record, and the consumer is (re)created at
// Applied.Next. AckExplicit with one message in flight keeps delivery in
// stream order even when a message is lost in flight and redelivered.
type inbox struct {
	js     jetstream.JetStream
	names  subjects.Names
	name   string
	tokens []string
	lag    prometheus.Observer // stored in the stream → read here (nil: not observed)
	cons   jetstream.Consumer
	iter   jetstream.MessagesContext
	stop   chan struct{}
	done   chan struct{}
	// lost receives the error that ended delivery unexpectedly (consumer
	// deleted, heartbeats missed after a server restart...); a new channel
	// per open, never closed.
	lost chan error
}

const (
	inboxPullExpiry  = 5 * time.Second
	consumerInactive = 10 * time.Minute
	consumerAckWait  = 5 * time.Second
)

func (ib *inbox) config(start uint64) jetstream.ConsumerConfig {
	filters := make([]string, len(ib.tokens))
	for i, t := range ib.tokens {
		filters[i] = ib.names.Inbox(t)
	}
	cfg := jetstream.ConsumerConfig{
		Durable: ib.name, FilterSubjects: filters,
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: consumerAckWait, MaxAckPending: 1,
		DeliverPolicy: jetstream.DeliverAllPolicy, InactiveThreshold: consumerInactive,
		MemoryStorage: true, Replicas: 1,
	}
	if start > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
	}
	return cfg
}

// open (re)creates the consumer at start and starts delivering decoded
// commands to out until the consumer is closed.
func (ib *inbox) open(ctx context.Context, start uint64, out chan<- runtime.Command) error {
	return ib.openAt(ctx, start, out, false)
}

// openFresh is open for a run's first consumer, whose name <id>-<epoch> is
// new: the epoch was just claimed by this run's CAS, and no other run ever
// uses it. It creates first and deletes only if the name exists after all
// (a create with an identical configuration returns the existing consumer:
// one that has delivered anything is not a fresh cursor), which saves the
// delete's round trip on the way to the first step.
func (ib *inbox) openFresh(ctx context.Context, start uint64, out chan<- runtime.Command) error {
	return ib.openAt(ctx, start, out, true)
}

func (ib *inbox) openAt(ctx context.Context, start uint64, out chan<- runtime.Command, fresh bool) error {
	ib.close()
	stream := ib.names.InboxStream()
	var cons jetstream.Consumer
	if fresh {
		c, err := ib.js.CreateConsumer(ctx, stream, ib.config(start))
		if err == nil && unused(c) {
			cons = c
		} else if err != nil && !errors.Is(err, jetstream.ErrConsumerExists) {
			return fmt.Errorf("driver: create consumer %s: %w", ib.name, err)
		}
	}
	if cons == nil {
		if err := ib.js.DeleteConsumer(ctx, stream, ib.name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("driver: delete consumer %s: %w", ib.name, err)
		}
		c, err := ib.js.CreateConsumer(ctx, stream, ib.config(start))
		if err != nil {
			return fmt.Errorf("driver: create consumer %s: %w", ib.name, err)
		}
		cons = c
	}
	// A pull request that is lost (a consumer created just as its stream
	// was born, a route flap) is only noticed by its expiry's heartbeat:
	// 5 s bounds that stall instead of the library's default 30 s.
	iter, err := cons.Messages(jetstream.PullMaxMessages(1), jetstream.PullExpiry(inboxPullExpiry))
	if err != nil {
		return fmt.Errorf("driver: consume %s: %w", ib.name, err)
	}
	ib.cons, ib.iter, ib.stop, ib.done, ib.lost = cons, iter, make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go ib.read(iter, out, ib.stop, ib.done, ib.lost)
	return nil
}

// unused reports whether a consumer has never delivered a message (nor
// has a client waiting on it): then it is the cursor a create would make.
func unused(c jetstream.Consumer) bool {
	i := c.CachedInfo()
	return i != nil && i.Delivered.Consumer == 0 && i.AckFloor.Consumer == 0 && i.NumAckPending == 0 &&
		i.NumRedelivered == 0 && i.NumWaiting == 0
}

func (ib *inbox) read(iter jetstream.MessagesContext, out chan<- runtime.Command, stop, done chan struct{}, lost chan<- error) {
	defer close(done)
	for {
		msg, err := iter.Next()
		if err != nil {
			select {
			case <-stop: // closed by the session
			default:
				lost <- err // consumer deleted, heartbeats missed...
			}
			return
		}
		meta, err := msg.Metadata()
		if err != nil {
			continue
		}
		_ = msg.Ack()
		if ib.lag != nil {
			ib.lag.Observe(time.Since(meta.Timestamp).Seconds())
		}
		select {
		case out <- wire.DecodeInput(meta.Sequence.Stream, msg.Data()):
		case <-stop:
			return
		}
	}
}

// close stops delivery (the consumer stays until remove or its inactivity
// threshold).
func (ib *inbox) close() {
	if ib.iter == nil {
		return
	}
	close(ib.stop)
	ib.iter.Stop()
	<-ib.done
	ib.iter = nil
}

// remove stops delivery and deletes the consumer.
func (ib *inbox) remove(ctx context.Context) error {
	ib.close()
	err := ib.js.DeleteConsumer(ctx, ib.names.InboxStream(), ib.name)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return err
	}
	return nil
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
