package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/baton-rt/baton/wire"
	"github.com/nats-io/nats.go/jetstream"
)

// Out-of-line output.
//
// The owner stores message.output text larger than wire.MaxEventDataBytes
// in the state object store, as the raw UTF-8 bytes under
// wire.BlobName(sessionID, ref), before the commit that references it; the
// durable event carries {"turnId","ref":{"digest","size"}} instead of
// "text". Readers get the event as if it were inline: refs fetches the
// content, verifies it against the ref and serves the envelope with "text"
// set and "ref" removed, every other member as stored. A ref that does not
// resolve (missing, corrupt or not UTF-8 content, content over
// MaxInlineOutput) is served as stored, so a client can still see that
// output was produced; the stream never fails for it.

// Limits of ref resolution.
const (
	// MaxInlineOutput is the largest out-of-line message.output content the
	// ingress inlines; above it the event is served with its ref.
	MaxInlineOutput = 8 << 20
	// blobCacheBytes bounds the resolved contents kept for other readers.
	blobCacheBytes = 32 << 20
	// blobRetry is how long a failed fetch is not repeated.
	blobRetry = 10 * time.Second
	// blobFetchTimeout bounds one fetch from the object store.
	blobFetchTimeout = 30 * time.Second
)

// refs resolves message.output refs for every reader of this ingress.
type refs struct {
	obs   jetstream.ObjectStore
	log   *slog.Logger
	met   *metrics
	cache *blobCache

	mu     sync.Mutex
	warned map[string]struct{} // objects whose failure was logged
}

func newRefs(obs jetstream.ObjectStore, log *slog.Logger, met *metrics, now func() time.Time) *refs {
	return &refs{
		obs: obs, log: log, met: met, warned: map[string]struct{}{},
		cache: newBlobCache(blobCacheBytes, blobRetry, blobFetchTimeout, now),
	}
}

// view is how one session's events are served: each envelope as stored,
// a message.output's out-of-line content resolved.
type view struct {
	refs      *refs
	sessionID string
	// inlineMax is the largest out-of-line content inlined (0:
	// MaxInlineOutput); larger content is served with its ref.
	inlineMax int64
}

// envelope returns the envelope to serve for ev.
func (v view) envelope(ctx context.Context, ev event) []byte {
	limit := v.inlineMax
	if limit <= 0 {
		limit = MaxInlineOutput
	}
	switch ev.kind {
	case wire.EventMessageOutput:
		return v.refs.inline(ctx, v.sessionID, ev.data, limit)
	case wire.EventTaskCompleted:
		return v.refs.inlineResult(ctx, v.sessionID, ev.data, limit)
	}
	return ev.data
}

// inlineResult returns a task.completed envelope with its resultRef
// resolved (the result as "result", JSON), or the envelope unchanged if it
// has none, it is larger than limit or it does not resolve to JSON.
func (r *refs) inlineResult(ctx context.Context, sessionID string, envelope []byte, limit int64) []byte {
	out, ok := parseRef(envelope, "resultRef")
	if !ok || out.ref.Size > limit {
		return envelope
	}
	name := wire.BlobName(sessionID, out.ref)
	result, err := r.cache.get(ctx, name, out.ref.Digest, func(ctx context.Context) ([]byte, error) {
		return r.fetch(ctx, name, out.ref)
	})
	if err == nil && !json.Valid(result) {
		err = errors.New("ingress: a task result blob that is not JSON")
	}
	if err != nil {
		r.warn(ctx, name, err)
		return envelope
	}
	return out.withValue("result", result)
}

// inline returns a message.output envelope with its ref resolved, or the
// envelope unchanged if it has no ref, the content is larger than limit or
// the ref does not resolve.
func (r *refs) inline(ctx context.Context, sessionID string, envelope []byte, limit int64) []byte {
	out, ok := parseOutput(envelope)
	if !ok || out.ref.Size > limit {
		return envelope
	}
	name := wire.BlobName(sessionID, out.ref)
	text, err := r.cache.get(ctx, name, out.ref.Digest, func(ctx context.Context) ([]byte, error) {
		return r.fetch(ctx, name, out.ref)
	})
	if err != nil {
		r.warn(ctx, name, err)
		return envelope
	}
	return out.with(text)
}

// errNotText: a blob that matches its ref but is not UTF-8 text.
var errNotText = errors.New("ingress: blob content is not UTF-8 text")

// fetch reads the referenced content of the object name, counting the
// result.
func (r *refs) fetch(ctx context.Context, name string, ref wire.BlobRef) ([]byte, error) {
	b, err := r.readRetry(ctx, name, ref)
	r.met.blobs.WithLabelValues(fetchResult(err)).Inc()
	return b, err
}

// readRetry is read with a few retries while the object is not found: the
// owner wrote it before the event, but the object's info is read with a
// direct get, which a lagging replica may answer.
func (r *refs) readRetry(ctx context.Context, name string, ref wire.BlobRef) ([]byte, error) {
	b, err := r.read(ctx, name, ref)
	for delay := 20 * time.Millisecond; errors.Is(err, jetstream.ErrObjectNotFound) && delay <= 320*time.Millisecond; delay *= 2 {
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(delay):
		}
		b, err = r.read(ctx, name, ref)
	}
	return b, err
}

// read reads the object name, at most the ref's size and one byte, and
// checks it is the referenced UTF-8 text.
func (r *refs) read(ctx context.Context, name string, ref wire.BlobRef) ([]byte, error) {
	res, err := r.obs.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	b, err := io.ReadAll(io.LimitReader(res, ref.Size+1))
	if err != nil {
		return nil, err
	}
	if err := ref.Verify(b); err != nil {
		return nil, err
	}
	if !utf8.Valid(b) {
		return nil, errNotText
	}
	return b, nil
}

func fetchResult(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, jetstream.ErrObjectNotFound):
		return "missing"
	case errors.Is(err, wire.ErrDigestMismatch), errors.Is(err, errNotText):
		return "corrupt"
	}
	return "error"
}

// warn logs the first failure to resolve an object; a reader that left is
// no failure.
func (r *refs) warn(ctx context.Context, name string, err error) {
	if ctx.Err() != nil || errors.Is(err, errBlobFailed) {
		return
	}
	r.mu.Lock()
	_, seen := r.warned[name]
	if !seen {
		if len(r.warned) >= maxFailed {
			clear(r.warned)
		}
		r.warned[name] = struct{}{}
	}
	r.mu.Unlock()
	if !seen {
		r.log.Warn("message.output content does not resolve; served with its ref", "object", name, "err", err)
	}
}
