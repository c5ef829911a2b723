package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/nats-io/nats.go/jetstream"
)

// benchJS measures the raw JetStream baselines every later figure is compared
// with.
func benchJS(ctx context.Context, e *env, r *bench.Reporter) error {
	for _, f := range []func(context.Context, *env, *bench.Reporter) error{
		benchPublishSync, benchPublishAsync, benchPublishConsume, benchPublishConsume100, benchKV, benchConsumerCreate, benchSyncAlways,
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

// benchPublishConsumeLoops: benchPublishConsume as loops closed loops at
// once, each on a subject and pull consumer of its own, against the same
// server — the raw counterpart of loops concurrent sessions, whose queueing
// on two cores is not Baton's serialisation. It reports the latencies and
// the loops' throughput (js_publish_consume_rtt_<loops>).
func benchPublishConsumeLoops(ctx context.Context, e *env, r *bench.Reporter, loops int) error {
	name := fmt.Sprintf("RAWRTT%d", loops)
	s, err := rawStream(ctx, e, name)
	if err != nil {
		return err
	}
	per := max(e.n(2000)/loops, 20)
	var mu sync.Mutex
	var samples []time.Duration
	var errs []error
	var wg sync.WaitGroup
	start := time.Now()
	for i := range loops {
		subject := fmt.Sprintf("%s.%d", name, i)
		c, err := s.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
			Durable: fmt.Sprintf("rtt%d", i), FilterSubjects: []string{subject},
			AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverNewPolicy,
		})
		if err != nil {
			return err
		}
		wg.Go(func() {
			got, err := publishConsumeLoop(ctx, e, c, subject, per)
			mu.Lock()
			samples, errs = append(samples, got...), append(errs, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.Latencies(fmt.Sprintf("js_publish_consume_rtt_%d", loops), samples, time.Since(start), bench.Field("loops", loops))
	return nil
}

// benchPublishConsume100 is the raw counterpart of 100 concurrent sessions
// (delivery_to_step_start_100's baseline).
func benchPublishConsume100(ctx context.Context, e *env, r *bench.Reporter) error {
	return benchPublishConsumeLoops(ctx, e, r, stepStartConcurrency)
}

// publishConsumeLoop runs n+5 publish → consume round trips on subject
// (the first five are warm-up) and returns the n measured ones.
func publishConsumeLoop(ctx context.Context, e *env, c jetstream.Consumer, subject string, n int) ([]time.Duration, error) {
	msgs, err := c.Messages()
	if err != nil {
		return nil, err
	}
	defer msgs.Stop()
	samples := make([]time.Duration, 0, n)
	for i := range n + 5 {
		t0 := time.Now()
		if _, err := e.js.Publish(ctx, subject, []byte("x")); err != nil {
			return samples, err
		}
		m, err := msgs.Next()
		if err != nil {
			return samples, err
		}
		d := time.Since(t0)
		if err := m.Ack(); err != nil {
			return samples, err
		}
		if i >= 5 {
			samples = append(samples, d)
		}
	}
	return samples, nil
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
