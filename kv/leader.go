package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/baton-rt/baton/record"
	"github.com/baton-rt/baton/subjects"
	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Leader reads. nats.go's kv.Get and GetRevision use direct get whenever the
// stream allows it, and on a cluster any current replica answers a direct
// get, so right after a write it may return an older revision (NATS.md).
// The JetStream API's STREAM.MSG.GET is answered by the stream leader only,
// which has applied every write it acknowledged. jetstream has no way to
// force it on a stream with AllowDirect, hence this raw request.

// Header names of KV markers (nats.go keeps its own constants private).
const (
	kvOpHeader = "KV-Operation"
	kvOpDelete = "DEL"
	kvOpPurge  = "PURGE"
)

// defaultTimeout bounds a leader read whose ctx has no deadline when the
// JetStream context has no default timeout either.
const defaultTimeout = 5 * time.Second

// Retry bounds of leader reads that wait for a revision to become visible.
const (
	retryFirst   = 5 * time.Millisecond
	retryMax     = 200 * time.Millisecond
	retryElapsed = 3 * time.Second
)

// apiPrefix is the JetStream API prefix js sends its requests under.
func apiPrefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	}
	return jetstream.DefaultAPIPrefix
}

// msgGetSubject is the leader-only message get subject of a stream. It is a
// JetStream API subject, not a Baton name, so subjects/ has no builder for
// it; the stream name comes from the server (the bucket's status).
func msgGetSubject(prefix, stream string) string { return prefix + "STREAM.MSG.GET." + stream }

type msgGetRequest struct {
	Seq        uint64 `json:"seq,omitempty"`
	LastBySubj string `json:"last_by_subj,omitempty"`
}

type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject string `json:"subject"`
		Seq     uint64 `json:"seq"`
		Header  []byte `json:"hdrs,omitempty"`
		Data    []byte `json:"data,omitempty"`
	} `json:"message,omitempty"`
}

// leaderLast reads key's newest message (value or marker) from the leader.
// A key with no message at all is record.ErrNotFound.
func (s *Store) leaderLast(ctx context.Context, b bucket, key string) (entry, error) {
	return s.leaderGet(ctx, b, key, msgGetRequest{LastBySubj: subjects.KVSubject(b.name, key)})
}

func (s *Store) leaderGet(ctx context.Context, b bucket, key string, req msgGetRequest) (entry, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return entry{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		timeout := s.js.Options().DefaultTimeout
		if timeout <= 0 {
			timeout = defaultTimeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	msg, err := s.nc.RequestWithContext(ctx, b.msgGet, body)
	if err != nil {
		return entry{}, fmt.Errorf("kv: leader read %s/%s: %w", b.name, key, err)
	}
	return parseMsgGet(b, key, msg.Data)
}

func parseMsgGet(b bucket, key string, data []byte) (entry, error) {
	var resp msgGetResponse
	if err := json.Unmarshal(data, &resp); err != nil {
		return entry{}, fmt.Errorf("kv: leader read %s/%s: %w", b.name, key, err)
	}
	if resp.Error != nil {
		// A raw API answer: the error code is all there is to match on.
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return entry{}, fmt.Errorf("%w: %s/%s", record.ErrNotFound, b.name, key)
		}
		return entry{}, fmt.Errorf("kv: leader read %s/%s: %w", b.name, key, resp.Error)
	}
	m := resp.Message
	if m == nil || m.Subject != subjects.KVSubject(b.name, key) {
		return entry{}, fmt.Errorf("%w: %s/%s", record.ErrNotFound, b.name, key)
	}
	e := entry{key: key, rev: m.Seq, data: m.Data}
	if len(m.Header) > 0 {
		h, err := nats.DecodeHeadersMsg(m.Header)
		if err != nil {
			return entry{}, fmt.Errorf("kv: leader read %s/%s headers: %w", b.name, key, err)
		}
		e.op = markerOp(h)
	}
	return e, nil
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
// change) or cannot be reached. A newer revision is record.ErrConflict; rev being a
// marker, or never appearing, is record.ErrNotFound.
func (s *Store) leaderAt(ctx context.Context, b bucket, key string, rev uint64) (entry, error) {
	if rev == 0 {
		return entry{}, invalid("read %s at revision 0", key)
	}
	e, err := retry(ctx, func() (entry, error) {
		cur, err := s.leaderLast(ctx, b, key)
		switch {
		case errors.Is(err, record.ErrNotFound):
			return entry{}, errNotYet
		case err != nil:
			return entry{}, err
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

// leaderLastRetry is leaderLast that retries an unreachable leader briefly.
// record.ErrNotFound is an answer, not retried.
func (s *Store) leaderLastRetry(ctx context.Context, b bucket, key string) (entry, error) {
	return retry(ctx, func() (entry, error) {
		e, err := s.leaderLast(ctx, b, key)
		if errors.Is(err, record.ErrNotFound) {
			return e, backoff.Permanent(err)
		}
		return e, err
	})
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
