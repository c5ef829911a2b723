package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
)

var client = harness.Client{HTTP: &http.Client{Timeout: 15 * time.Second}}

// call sends body as JSON and decodes a `want` answer into out.
func call(ctx context.Context, method, url string, body any, want int, out any, opts ...harness.Option) error {
	return client.Call(ctx, method, url, body, want, out, opts...)
}

// retry repeats f while it fails with a 503 or a transport error (the stack
// is still starting), until ctx ends.
func retry(ctx context.Context, f func() error) error {
	return harness.Retry(ctx, 0, 500*time.Millisecond, harness.Unavailable, f)
}

// retryLong repeats f on transport errors and 5xx for up to d (a NATS node
// restarting, an owner being adopted): the same idempotency key makes a
// repeat safe.
func retryLong(ctx context.Context, d time.Duration, fn func() error) error {
	return harness.Retry(ctx, d, 300*time.Millisecond, harness.ServerError, fn)
}

func waitReady(ctx context.Context, base string) error {
	return client.WaitReady(ctx, base, 500*time.Millisecond)
}

// waitStatus polls the session's status until ok holds.
func waitStatus(ctx context.Context, base, id string, ok func(ingress.Status) bool) (ingress.Status, error) {
	var last ingress.Status
	var lastErr error
	for {
		var s ingress.Status
		lastErr = call(ctx, "GET", base+"/v1/sessions/"+id, nil, http.StatusOK, &s)
		if lastErr == nil {
			if ok(s) {
				return s, nil
			}
			last = s
		}
		if !harness.Sleep(ctx, 200*time.Millisecond) {
			return last, fmt.Errorf("%w (last status %+v, last error %v)", ctx.Err(), last, lastErr)
		}
	}
}
