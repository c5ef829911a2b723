package ingress

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"
)

// errBlobFailed answers a lookup of a blob whose fetch failed less than
// blobCache.retry ago: it is not fetched again until then.
var errBlobFailed = errors.New("ingress: blob fetch failed recently")

// blobCache holds verified blob contents by digest, up to max bytes in all
// (the least recently used leave first), and fetches a missing blob once
// however many readers ask for it at the same time. A failed fetch is
// remembered for retry, so a missing or corrupt blob costs one fetch per
// retry interval, not one per reader. The lock is never held across a
// fetch: readers of other blobs never wait for it.
type blobCache struct {
	max     int64
	retry   time.Duration
	timeout time.Duration
	now     func() time.Time

	mu     sync.Mutex
	lru    *list.List // of *blobEntry, most recently used first
	byDig  map[string]*list.Element
	size   int64
	calls  map[string]*blobCall // fetches in flight, by object name
	failed map[string]time.Time // failed fetches, by object name
}

type blobEntry struct {
	digest  string
	content []byte
}

// blobCall is one fetch; done is closed once content and err are set.
type blobCall struct {
	done    chan struct{}
	content []byte
	err     error
	joined  int // readers waiting for the fetch besides its leader (c.mu)
}

// maxFailed bounds the failures remembered (all are forgotten when full).
const maxFailed = 1024

func newBlobCache(max int64, retry, timeout time.Duration, now func() time.Time) *blobCache {
	return &blobCache{
		max: max, retry: retry, timeout: timeout, now: now,
		lru: list.New(), byDig: map[string]*list.Element{},
		calls: map[string]*blobCall{}, failed: map[string]time.Time{},
	}
}

// get returns the content of the object name with digest, from the cache
// or by fetch. The first reader runs the fetch, detached from its context
// (readers waiting for the same fetch must not fail when it leaves) and
// bounded by the timeout; the others wait for it or for their context.
func (c *blobCache) get(ctx context.Context, name, digest string, fetch func(context.Context) ([]byte, error)) ([]byte, error) {
	call, lead := c.join(name, digest)
	if lead {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		content, err := fetch(fctx)
		cancel()
		c.finish(name, digest, call, content, err)
	}
	select {
	case <-call.done:
		return call.content, call.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// join returns the call that answers name: a finished one for a cached or
// recently failed blob, the fetch in flight, or a new fetch the caller
// leads.
func (c *blobCache) join(name, digest string) (*blobCall, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byDig[digest]; ok {
		c.lru.MoveToFront(el)
		return finished(el.Value.(*blobEntry).content, nil), false
	}
	if at, ok := c.failed[name]; ok && c.now().Sub(at) < c.retry {
		return finished(nil, errBlobFailed), false
	}
	if call, ok := c.calls[name]; ok {
		call.joined++
		return call, false
	}
	call := &blobCall{done: make(chan struct{})}
	c.calls[name] = call
	return call, true
}

func finished(content []byte, err error) *blobCall {
	call := &blobCall{done: make(chan struct{}), content: content, err: err}
	close(call.done)
	return call
}

// finish records a fetch's result and releases its waiters.
func (c *blobCache) finish(name, digest string, call *blobCall, content []byte, err error) {
	c.mu.Lock()
	delete(c.calls, name)
	if err == nil {
		delete(c.failed, name)
		c.add(digest, content)
	} else {
		c.fail(name)
	}
	c.mu.Unlock()
	call.content, call.err = content, err
	close(call.done)
}

// add caches content under digest and evicts down to max (c.mu held).
func (c *blobCache) add(digest string, content []byte) {
	if int64(len(content)) > c.max {
		return
	}
	if _, ok := c.byDig[digest]; ok {
		return
	}
	c.byDig[digest] = c.lru.PushFront(&blobEntry{digest: digest, content: content})
	c.size += int64(len(content))
	for c.size > c.max {
		old := c.lru.Remove(c.lru.Back()).(*blobEntry)
		delete(c.byDig, old.digest)
		c.size -= int64(len(old.content))
	}
}

// fail remembers a failed fetch of name (c.mu held).
func (c *blobCache) fail(name string) {
	if len(c.failed) >= maxFailed {
		clear(c.failed)
	}
	c.failed[name] = c.now()
}
