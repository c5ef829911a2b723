package pool

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// eachBounded runs f for each id, at most n at a time, and waits for them;
// it stops starting new ones when ctx ends and then reports false.
func eachBounded(ctx context.Context, ids []string, n int, f func(id string)) bool {
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, id := range ids {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return false
		}
		wg.Go(func() {
			defer func() { <-sem }()
			f(id)
		})
	}
	return true
}

// jittered calls f every interval ±10 % until ctx ends (never if interval
// is not positive).
func jittered(ctx context.Context, interval time.Duration, f func()) {
	if interval <= 0 {
		return
	}
	for {
		sleep(ctx, spread(interval))
		if ctx.Err() != nil {
			return
		}
		f()
	}
}

// spread is interval ±10 % (a positive interval; else interval).
func spread(interval time.Duration) time.Duration {
	if interval <= 0 {
		return interval
	}
	return interval + time.Duration(rand.Int64N(int64(interval)/5+1)) - interval/10
}
