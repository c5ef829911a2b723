package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// A commit's events reach the stream as one fast batch (nats-server 2.14+,
// stream option AllowBatchPublish): every message is sent at once and the
// server answers once, for the whole batch, instead of once per event. The
// protocol is the server's reply-subject suffix (nats.go has no API for
// it): message k of batch id goes out with the reply subject
//
//	<inbox>.<id>.<flow>.fail.<k>.<op>.$FI
//
// op 0 starting the batch, 1 appending, 2 committing it with its last
// message. "fail" is the gap mode: the server stores message k only if
// messages 1..k-1 of the batch were stored (or were duplicates), and a
// message it refuses, or a lost one, ends the batch there.
//
// The fence (docs/architecture.md, invariant 3): the first message carries
// the expected last subject sequence, so the batch starts only right after
// what this appender knows is the subject's last event; every message
// carries its message ID <sessionID>/<seq>. Any other writer's message on
// the subject is either the first of its own batch, fenced the same way,
// or an event of the same committed outbox (same seq, same bytes, same ID:
// a stale owner's or a successor's republish), which the server drops as a
// duplicate within the stream's duplicate window (2 minutes, longer than
// the server's 10 s lifetime of an idle batch, after which a late message
// of the batch is refused as of an unknown batch). So no event lands out of
// order or twice, and none after a gap.

// batchFlow is the number of messages after which the server may send a
// flow-control ack; a commit's batch is far smaller, so none is awaited.
const batchFlow = 500

// Batches sends fast batches on one connection and routes the server's
// replies by batch ID through one wildcard subscription. Create one per
// connection with NewBatches and give it to the appenders with
// Appender.WithBatches; Close it when the connection is done.
type Batches struct {
	nc     *nats.Conn
	prefix string // <inbox>.
	sub    *nats.Subscription

	mu   sync.Mutex
	wait map[string]chan routed

	off atomic.Bool // the stream refused a batch: publish one at a time
}

// NewBatches returns the batch sender of nc for events stream stream, or
// nil (publish one event at a time) when the stream does not allow fast
// batches: a server older than 2.14 drops the stream option, and the check
// is what the server reports.
func NewBatches(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, stream string) (*Batches, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("eventlog: stream %s: %w", stream, err)
	}
	if !s.CachedInfo().Config.AllowBatchPublish {
		return nil, nil
	}
	b := &Batches{nc: nc, prefix: nats.NewInbox() + ".", wait: map[string]chan routed{}}
	b.sub, err = nc.Subscribe(b.prefix+">", b.route)
	if err != nil {
		return nil, fmt.Errorf("eventlog: batch replies: %w", err)
	}
	return b, nil
}

// Close ends the reply subscription.
func (b *Batches) Close() {
	if b != nil && b.sub != nil {
		_ = b.sub.Unsubscribe()
	}
}

// route hands a reply to the batch that waits for it. Only the replies
// the batch acts on go through: its final PubAck and the errors the server
// reports. The rest — a flow ack after every message while other batches
// are in flight on the stream, a gap report — are dropped here, so they
// cannot fill the batch's channel ahead of its final reply (which the
// non-blocking send would then drop, leaving the batch to wait for
// batchReplyWait). A batch's channel holds one error per message and its
// final reply: no reply it acts on is ever dropped.
func (b *Batches) route(m *nats.Msg) {
	id, _, _ := strings.Cut(strings.TrimPrefix(m.Subject, b.prefix), ".")
	var r batchReply
	err := json.Unmarshal(m.Data, &r)
	if err == nil && (r.Type == flowAck || r.Type == flowGap) {
		return
	}
	if err != nil {
		err = fmt.Errorf("eventlog: batch reply %q: %w", m.Data, err)
	}
	b.mu.Lock()
	ch := b.wait[id]
	b.mu.Unlock()
	if ch != nil {
		select {
		case ch <- routed{reply: r, err: err}:
		default: // more than one reply per message: not the server's protocol
		}
	}
}

// await registers batch id of n messages for route and returns the
// channel its replies arrive on, and the func that unregisters it.
func (b *Batches) await(id string, n int) (<-chan routed, func()) {
	ch := make(chan routed, n+1) // route's bound: an error per message, the final reply
	b.mu.Lock()
	b.wait[id] = ch
	b.mu.Unlock()
	return ch, func() {
		b.mu.Lock()
		delete(b.wait, id)
		b.mu.Unlock()
	}
}

// routed is a reply as route hands it to its batch: decoded, or why not.
type routed struct {
	reply batchReply
	err   error
}

// The "type" of the server's informational replies to a fast batch's
// messages (nats-server's BatchFlowAck, BatchFlowGap, BatchFlowErr); the
// final PubAck has none.
const (
	flowAck = "ack"
	flowGap = "gap"
	flowErr = "err"
)

// batchReply is what the server answers a message of a fast batch: a flow
// ack, a gap or an error for one message, or the batch's final PubAck
// (batch and count set: the first count messages of the batch are on the
// stream, the last at stream sequence Seq) or a PubAck error (its first
// message was refused, nothing stored).
type batchReply struct {
	Type  string    `json:"type"`
	Seq   uint64    `json:"seq"`
	Batch string    `json:"batch"`
	Count int       `json:"count"`
	Error *replyErr `json:"error"`
}

type replyErr struct {
	Code        int    `json:"code"`
	ErrCode     int    `json:"err_code"`
	Description string `json:"description"`
}

func (e *replyErr) Error() string {
	return fmt.Sprintf("nats: %s (%d/%d)", e.Description, e.Code, e.ErrCode)
}

// errBatchesOff is a batch the stream refused as a batch (batches not
// allowed, too many in flight): the caller publishes one at a time.
var errBatchesOff = errors.New("eventlog: fast batch refused")

// Server error codes that refuse a batch as such, not its content.
const (
	errCodeBatchDisabled    = 10205
	errCodeBatchTooInflight = 10211
)

// send publishes data as events first, first+1, … of subject in one batch,
// the first fenced at streamSeq, and waits for the final reply. It returns
// how many of them are on the stream (in order, from the first) and the
// stream sequence of the last of those; an error says why the rest are
// not (a refusal, a lost reply: the caller reads the leader).
func (b *Batches) send(ctx context.Context, subject, sessionID string, streamSeq, first uint64, data [][]byte) (int, uint64, error) {
	id := nuid.Next()
	ch, done := b.await(id, len(data))
	defer done()
	// Replies for every message go to the batch's own subjects; the one
	// this waits for is the final PubAck (or the first message's refusal).
	base := b.prefix + id + "." + strconv.Itoa(batchFlow) + ".fail."
	for k, d := range data {
		op := "1"
		switch {
		case k == len(data)-1:
			op = "2"
		case k == 0:
			op = "0"
		}
		seq := first + uint64(k)
		m := nats.NewMsg(subject)
		m.Data = d
		m.Reply = base + strconv.Itoa(k+1) + "." + op + ".$FI"
		m.Header.Set(wire.HeaderEventSeq, strconv.FormatUint(seq, 10))
		m.Header.Set(jetstream.MsgIDHeader, sessionID+"/"+strconv.FormatUint(seq, 10))
		if k == 0 {
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(streamSeq, 10))
		}
		if err := b.nc.PublishMsg(m); err != nil {
			return 0, 0, err
		}
	}
	var msgErr error // an error the server reported for one message
	for {
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case m := <-ch:
			if m.err != nil {
				return 0, 0, m.err
			}
			r := m.reply
			switch {
			case r.Type == flowErr && r.Error != nil:
				msgErr = r.Error
			case r.Type != "":
				// not the server's protocol today: the final reply follows
			case r.Error != nil:
				if r.Error.ErrCode == errCodeBatchDisabled || r.Error.ErrCode == errCodeBatchTooInflight {
					if r.Error.ErrCode == errCodeBatchDisabled {
						b.off.Store(true)
					}
					return 0, 0, fmt.Errorf("%w: %v", errBatchesOff, r.Error)
				}
				return 0, 0, r.Error
			case r.Batch == id:
				if r.Count >= len(data) {
					return r.Count, r.Seq, nil
				}
				if msgErr == nil {
					msgErr = fmt.Errorf("eventlog: batch of %d events ended after %d", len(data), r.Count)
				}
				return r.Count, r.Seq, msgErr
			}
		}
	}
}
