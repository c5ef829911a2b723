package kv

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// The reconciler's walks: the keys of the sessions bucket's and the
// index bucket's streams, a batch at a time, headers only.

// SessionKeys reads up to n keys of the sessions bucket's stream from
// sequence from on (every revision it still holds, headers only), and the
// sequence to continue from (0: the stream's end was reached). The
// reconciler's walk.
func (x *Index) SessionKeys(ctx context.Context, from uint64, n int) ([]string, uint64, error) {
	return x.scanKeys(ctx, "KV_"+x.names.SessionsBucket(), from, n)
}

// IndexKeys is SessionKeys over the index bucket's stream.
func (x *Index) IndexKeys(ctx context.Context, from uint64, n int) ([]string, uint64, error) {
	return x.scanKeys(ctx, "KV_"+x.b.name, from, n)
}

func (x *Index) scanKeys(ctx context.Context, stream string, from uint64, n int) ([]string, uint64, error) {
	c, err := x.js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: max(from, 1), HeadersOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("kv: walk %s: %w", stream, err)
	}
	prefix := "$KV." + strings.TrimPrefix(stream, "KV_") + "."
	batch, err := c.FetchNoWait(n)
	if err != nil {
		return nil, 0, fmt.Errorf("kv: walk %s: %w", stream, err)
	}
	var keys []string
	var next uint64
	for m := range batch.Messages() {
		if md, err := m.Metadata(); err == nil {
			next = md.Sequence.Stream + 1
			if md.NumPending == 0 {
				next = 0
			}
		}
		keys = append(keys, strings.TrimPrefix(m.Subject(), prefix))
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return nil, 0, fmt.Errorf("kv: walk %s: %w", stream, err)
	}
	return keys, next, nil
}
