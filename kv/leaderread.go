package kv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Leader reads of KV keys (leader.go sends them).

// Header names of KV markers (nats.go keeps its own constants private).
const (
	kvOpHeader = "KV-Operation"
	kvOpDelete = "DEL"
	kvOpPurge  = "PURGE"
)

// Retry bounds of leader reads that wait for a revision to become visible.
const (
	retryFirst   = 5 * time.Millisecond
	retryMax     = 200 * time.Millisecond
	retryElapsed = 3 * time.Second
)

// leaderLast reads key's newest message (value or marker) from the leader,
// waiting out a stream without a leader until ctx's deadline. A key with no
// message at all is record.ErrNotFound.
func (s *Store) leaderLast(ctx context.Context, b bucket, key string) (entry, error) {
	subject := subjects.KVSubject(b.name, key)
	m, err := b.leader.get(ctx, msgGetRequest{LastFor: subject})
	if err != nil {
		return entry{}, err
	}
	if m.Subject != subject {
		return entry{}, fmt.Errorf("%w: %s/%s", record.ErrNotFound, b.name, key)
	}
	return entry{key: key, rev: m.Sequence, data: m.Data, op: markerOp(m.Header)}, nil
}

// markerOp classifies a message the way nats.go's KV does: a KV-Operation
// header (Delete, Purge), else a server marker (TTL expiry is "MaxAge").
func markerOp(h nats.Header) jetstream.KeyValueOp {
	switch h.Get(kvOpHeader) {
	case kvOpDelete:
		return jetstream.KeyValueDelete
	case kvOpPurge:
		return jetstream.KeyValuePurge
	}
	switch h.Get(jetstream.MarkerReasonHeader) {
	case "MaxAge", "Purge":
		return jetstream.KeyValuePurge
	case "Remove":
		return jetstream.KeyValueDelete
	}
	return jetstream.KeyValuePut
}

// errNotYet marks a leader answer older than the revision asked for.
var errNotYet = errors.New("kv: revision not yet visible")

// leaderAt returns key's value at exactly rev from the leader, retrying
// briefly while the leader does not have it yet (just after a leader
// change). A newer revision is record.ErrConflict; rev being a marker, or
// never appearing, is record.ErrNotFound.
func (s *Store) leaderAt(ctx context.Context, b bucket, key string, rev uint64) (entry, error) {
	if rev == 0 {
		return entry{}, invalid("read %s at revision 0", key)
	}
	e, err := retry(ctx, func() (entry, error) {
		cur, err := s.leaderLast(ctx, b, key)
		switch {
		case errors.Is(err, record.ErrNotFound):
			return entry{}, errNotYet
		case err != nil: // leaderLast waited for a leader already
			return entry{}, backoff.Permanent(err)
		case cur.rev < rev:
			return entry{}, errNotYet
		case cur.rev > rev:
			return entry{}, backoff.Permanent(fmt.Errorf("%w: %s/%s is at revision %d, not %d", record.ErrConflict, b.name, key, cur.rev, rev))
		case !cur.live():
			return entry{}, backoff.Permanent(fmt.Errorf("%w: %s/%s revision %d is a delete marker", record.ErrNotFound, b.name, key, rev))
		}
		return cur, nil
	})
	if errors.Is(err, errNotYet) {
		return entry{}, fmt.Errorf("%w: %s/%s revision %d (the stream leader does not hold it)", record.ErrNotFound, b.name, key, rev)
	}
	return e, err
}

// retry runs op with exponential backoff bounded by retryElapsed and ctx.
// Errors other than those marked backoff.Permanent are retried.
func retry[T any](ctx context.Context, op func() (T, error)) (T, error) {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(retryFirst),
		backoff.WithMaxInterval(retryMax),
		backoff.WithMaxElapsedTime(retryElapsed),
	)
	return backoff.RetryWithData(op, backoff.WithContext(b, ctx))
}

// LeaderGet reads key's live value in bucket from the stream leader (a
// direct get may be answered by a replica that has not applied the latest
// write yet): a key with no value, or whose newest message is a delete or
// purge marker, is record.ErrNotFound. It is for readers outside Store
// that need read-after-write on a cluster, such as the ingress's
// idempotency receipts.
func LeaderGet(ctx context.Context, js jetstream.JetStream, bucket, key string) ([]byte, uint64, error) {
	l := newLeader(js, "KV_"+bucket)
	subject := subjects.KVSubject(bucket, key)
	m, err := l.get(ctx, msgGetRequest{LastFor: subject})
	if err != nil {
		return nil, 0, err
	}
	if m.Subject != subject || markerOp(m.Header) != jetstream.KeyValuePut {
		return nil, 0, fmt.Errorf("%w: %s/%s", record.ErrNotFound, bucket, key)
	}
	return m.Data, m.Sequence, nil
}
