package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/nats-io/nats.go/jetstream"
)

// benchJS measures the raw JetStream baselines every later figure is compared
// with.
func benchJS(ctx context.Context, e *env, r *bench.Reporter) error {
	for _, f := range []func(context.Context, *env, *bench.Reporter) error{
		benchPublishSync, benchPublishAsync, benchPublishConsume, benchKV, benchConsumerCreate, benchSyncAlways,
	} {
		if err := f(ctx, e, r); err != nil {
			return err
		}
	}
	return nil
}

func rawStream(ctx context.Context, e *env, name string) (jetstream.Stream, error) {
	return e.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: name, Subjects: []string{name + ".>"}, Storage: jetstream.FileStorage,
		Retention: jetstream.LimitsPolicy, MaxConsumers: 100_000,
	})
}

func benchPublishSync(ctx context.Context, e *env, r *bench.Reporter) error {
	if _, err := rawStream(ctx, e, "RAWPUB"); err != nil {
		return err
	}
	payload := make([]byte, 256)
	n := e.n(5000)
	samples := make([]time.Duration, 0, n)
	for i := range n + 200 {
		t0 := time.Now()
		if _, err := e.js.Publish(ctx, fmt.Sprintf("RAWPUB.s%d", i%100), payload); err != nil {
			return err
		}
		if i >= 200 { // warm-up
			samples = append(samples, time.Since(t0))
		}
	}
	r.Latencies("js_publish_sync", samples, 0, bench.Field("bytes", len(payload)))
	return nil
}

// publishAsync publishes without waiting for the acknowledgement; when
// too many are outstanding (a loaded machine) it lets them drain first.
func publishAsync(js jetstream.JetStream, subject string, data []byte, opts ...jetstream.PublishOpt) error {
	_, err := js.PublishAsync(subject, data, opts...)
	for errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(time.Minute):
			return fmt.Errorf("async publishes not acknowledged")
		}
		_, err = js.PublishAsync(subject, data, opts...)
	}
	return err
}

func benchPublishAsync(ctx context.Context, e *env, r *bench.Reporter) error {
	payload := make([]byte, 128)
	n := e.n(50_000)
	start := time.Now()
	for i := range n {
		if err := publishAsync(e.js, fmt.Sprintf("RAWPUB.a%d", i%100), payload); err != nil {
			return err
		}
	}
	select {
	case <-e.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return fmt.Errorf("async publishes not acknowledged")
	}
	r.Throughput("js_publish_async", n, time.Since(start), bench.Field("bytes", len(payload)))
	return nil
}

// benchPublishConsume: a sync publish, then the pull consumer's delivery of
// that message (publish start → message in hand).
func benchPublishConsume(ctx context.Context, e *env, r *bench.Reporter) error {
	s, err := rawStream(ctx, e, "RAWRTT")
	if err != nil {
		return err
	}
	c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "rtt", FilterSubjects: []string{"RAWRTT.a", "RAWRTT.b"},
		AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return err
	}
	msgs, err := c.Messages()
	if err != nil {
		return err
	}
	defer msgs.Stop()
	n := e.n(3000)
	samples := make([]time.Duration, 0, n)
	for i := range n + 100 {
		t0 := time.Now()
		if _, err := e.js.Publish(ctx, "RAWRTT.a", []byte("x")); err != nil {
			return err
		}
		m, err := msgs.Next()
		if err != nil {
			return err
		}
		d := time.Since(t0)
		if err := m.Ack(); err != nil {
			return err
		}
		if i >= 100 {
			samples = append(samples, d)
		}
	}
	r.Latencies("js_publish_consume_rtt", samples, 0)
	return nil
}

func benchKV(ctx context.Context, e *env, r *bench.Reporter) error {
	kv, err := e.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "rawkv", Storage: jetstream.FileStorage})
	if err != nil {
		return err
	}
	rev, err := kv.Put(ctx, "k", make([]byte, 512))
	if err != nil {
		return err
	}
	n := e.n(5000)
	cas := make([]time.Duration, 0, n)
	get := make([]time.Duration, 0, n)
	val := make([]byte, 512)
	for i := range n + 200 {
		t0 := time.Now()
		if rev, err = kv.Update(ctx, "k", val, rev); err != nil {
			return err
		}
		t1 := time.Now()
		if _, err := kv.Get(ctx, "k"); err != nil {
			return err
		}
		if i >= 200 {
			cas = append(cas, t1.Sub(t0))
			get = append(get, time.Since(t1))
		}
	}
	r.Latencies("kv_cas_update", cas, 0, bench.Field("bytes", len(val)))
	r.Latencies("kv_get", get, 0)
	return nil
}

func benchConsumerCreate(ctx context.Context, e *env, r *bench.Reporter) error {
	s, err := rawStream(ctx, e, "RAWCON")
	if err != nil {
		return err
	}
	n := e.n(500)
	samples := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		_, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:        fmt.Sprintf("c%d", i),
			FilterSubjects: []string{fmt.Sprintf("RAWCON.%d.a", i), fmt.Sprintf("RAWCON.%d.b", i)},
			AckPolicy:      jetstream.AckExplicitPolicy, InactiveThreshold: time.Hour,
		})
		if err != nil {
			return err
		}
		samples = append(samples, time.Since(t0))
	}
	r.Latencies("consumer_create", samples, 0, bench.Field("filters", 2))
	return nil
}
