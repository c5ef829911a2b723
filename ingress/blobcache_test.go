package ingress

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// clock is a settable time for the cache's retry window.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func content(n int) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) { return make([]byte, n), nil }
}

// The cache holds at most max bytes, least recently used out first.
func TestBlobCacheEvicts(t *testing.T) {
	t.Parallel()
	c := newBlobCache(10, time.Second, time.Second, time.Now)
	for i := range 3 {
		if _, err := c.get(t.Context(), "o"+strconv.Itoa(i), "d"+strconv.Itoa(i), content(4)); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			_, _ = c.get(t.Context(), "o0", "d0", nil) // d0 used last: d1 leaves
		}
	}
	if c.size != 8 || c.byDig["d1"] != nil || c.byDig["d0"] == nil || c.byDig["d2"] == nil {
		t.Fatalf("cache holds %d bytes, d0 %v d1 %v d2 %v", c.size, c.byDig["d0"] != nil, c.byDig["d1"] != nil, c.byDig["d2"] != nil)
	}
	if _, err := c.get(t.Context(), "big", "big", content(11)); err != nil || c.byDig["big"] != nil {
		t.Fatalf("content over the cap: err %v, cached %v", err, c.byDig["big"] != nil)
	}
}

// Readers asking at once share one fetch; one that leaves does not fail
// the others, nor the fetch.
func TestBlobCacheOneFetch(t *testing.T) {
	t.Parallel()
	c := newBlobCache(1<<20, time.Second, time.Minute, time.Now)
	var calls atomic.Int32
	release := make(chan struct{})
	fetch := func(ctx context.Context) ([]byte, error) {
		calls.Add(1)
		select {
		case <-release:
			return []byte("x"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	leader, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := c.get(leader, "o", "d", fetch); done <- err }()
	waitFor(t, func() bool { return calls.Load() == 1 })
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if b, err := c.get(t.Context(), "o", "d", fetch); err != nil || string(b) != "x" {
				t.Errorf("waiter got %q, %v", b, err)
			}
		})
	}
	waitFor(t, func() bool { return joined(c, "o") == 8 })
	cancel() // the leader's reader leaves; its fetch goes on
	close(release)
	wg.Wait()
	if err := <-done; !errors.Is(err, context.Canceled) && err != nil {
		t.Fatalf("leader: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
}

// A failed fetch is not repeated within the retry window.
func TestBlobCacheRetry(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Unix(0, 0)}
	c := newBlobCache(1<<20, 10*time.Second, time.Second, clk.Now)
	var calls int
	boom := errors.New("boom")
	fetch := func(context.Context) ([]byte, error) { calls++; return nil, boom }
	if _, err := c.get(t.Context(), "o", "d", fetch); !errors.Is(err, boom) {
		t.Fatalf("first get: %v", err)
	}
	clk.add(9 * time.Second)
	if _, err := c.get(t.Context(), "o", "d", fetch); !errors.Is(err, errBlobFailed) || calls != 1 {
		t.Fatalf("within the window: %v after %d fetches", err, calls)
	}
	clk.add(time.Second)
	if b, err := c.get(t.Context(), "o", "d", content(1)); err != nil || len(b) != 1 {
		t.Fatalf("after the window: %q, %v", b, err)
	}
	if _, err := c.get(t.Context(), "other", "d2", fetch); !errors.Is(err, boom) {
		t.Fatalf("another object: %v", err)
	}
}

// joined is the number of readers waiting for the fetch of name.
func joined(c *blobCache, name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if call := c.calls[name]; call != nil {
		return call.joined
	}
	return -1
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
