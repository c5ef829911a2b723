package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/baton-rt/baton/internal/natsd"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// benchSyncAlways measures the cost of `sync_interval: always` (fsync every
// write) against the default policy: a second embedded server with
// SyncAlways, the same sync publish and KV CAS loops.
func benchSyncAlways(ctx context.Context, e *env, r *bench.Reporter) error {
	dir, err := os.MkdirTemp("", "baton-bench-sync-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	s, err := natsd.Start(natsd.Config{Dir: dir, Port: -1, Name: "bench-sync", SyncAlways: true})
	if err != nil {
		return err
	}
	defer natsd.Shutdown(s)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	se := &env{url: s.ClientURL(), nc: nc, js: js, scale: e.scale}
	if _, err := rawStream(ctx, se, "SYNCPUB"); err != nil {
		return err
	}
	n := e.n(1000)
	samples := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		if _, err := js.Publish(ctx, fmt.Sprintf("SYNCPUB.s%d", i%10), make([]byte, 256)); err != nil {
			return err
		}
		samples = append(samples, time.Since(t0))
	}
	r.Latencies("js_publish_sync_always", samples, 0, bench.Baseline("js_publish_sync"), bench.Field("sync", "always"))
	return nil
}
