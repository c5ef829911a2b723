package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/baton-rt/baton/internal/bench"
	"github.com/nats-io/nats.go/jetstream"
)

// writeCounts are the messages stored per resource: the durable JetStream
// writes Baton makes.
type writeCounts struct{ inbox, records, events uint64 }

func (w writeCounts) total() uint64 { return w.inbox + w.records + w.events }

func (rg *rig) counts(ctx context.Context) (writeCounts, error) {
	var w writeCounts
	for name, dst := range map[string]*uint64{
		rg.names.InboxStream(): &w.inbox, "KV_" + rg.names.SessionsBucket(): &w.records, rg.names.EventsStream(): &w.events,
	} {
		s, err := rg.e.js.Stream(ctx, name)
		if err != nil {
			return w, err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return w, err
		}
		*dst = info.State.LastSeq
	}
	rg.ownAPI.Add(6) // per stream: its lookup and its info
	return w, nil
}

func (w writeCounts) sub(o writeCounts) writeCounts {
	return writeCounts{w.inbox - o.inbox, w.records - o.records, w.events - o.events}
}

// benchThroughput: deliveries/s over 1,000 sessions, and the same write
// pattern done raw, without Baton's logic.
func benchThroughput(ctx context.Context, rg *rig, r *bench.Reporter) error {
	n := rg.e.n(1000)
	ids, err := rg.startSessions(n)
	if err != nil {
		return err
	}
	per, err := rg.calibrate(ctx, ids[0])
	if err != nil {
		return err
	}
	m := max(n*6, 1)
	before, err := rg.counts(ctx)
	if err != nil {
		return err
	}
	allBefore, err := rg.storeCounts(ctx)
	if err != nil {
		return err
	}
	stopProfile, err := profileFigure("deliveries_per_s")
	if err != nil {
		return err
	}
	elapsed, err := rg.flood(ctx, ids, m, before.events+uint64(m)*per.events)
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	if err := rg.settle(ctx); err != nil { // the writes after the last event (purges, index)
		return err
	}
	after, err := rg.counts(ctx)
	if err != nil {
		return err
	}
	allAfter, err := rg.storeCounts(ctx)
	if err != nil {
		return err
	}
	d := after.sub(before)
	if err := benchRawPattern(ctx, rg.e, r, n, m, frozenPattern); err != nil {
		return err
	}
	opts := append([]bench.Option{bench.Baseline("raw_delivery_pattern"),
		bench.Field("sessions", n), bench.Field("writes", fmt.Sprintf("%.2f", float64(d.total())/float64(m))),
		bench.Field("inbox_writes", fmt.Sprintf("%.2f", float64(d.inbox)/float64(m))),
		bench.Field("record_writes", fmt.Sprintf("%.2f", float64(d.records)/float64(m))),
		bench.Field("event_writes", fmt.Sprintf("%.2f", float64(d.events)/float64(m))),
		bench.Field("calibrated", per.total())}, perDelivery(allBefore, allAfter, m)...)
	r.Throughput("deliveries_per_s", m, elapsed, opts...)
	return benchScaling(ctx, rg, r, per)
}

// scalingSessions are the busy sessions of deliveries_per_s_<n>; the
// 1,000 of deliveries_per_s is the series' last point.
var scalingSessions = []int{1, 10, 100}

// benchScaling: deliveries/s with 1, 10 and 100 busy sessions, each run
// on fresh sessions (after deliveries_per_s, so its figure is measured as
// before): max(6n, 2,000) deliveries published at once over the n sessions,
// timed until all their events are on the stream. Absolute throughput
// only (no raw baseline runs at each size); -figureprofile writes each
// run's CPU profile for cpushare.
func benchScaling(ctx context.Context, rg *rig, r *bench.Reporter, per writeCounts) error {
	for _, n := range scalingSessions {
		n = max(rg.e.n(n), 1)
		ids, err := rg.startSessions(n)
		if err != nil {
			return err
		}
		if err := rg.settle(ctx); err != nil {
			return err
		}
		before, err := rg.counts(ctx)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("deliveries_per_s_%d", n)
		stopProfile, err := profileFigure(name)
		if err != nil {
			return err
		}
		m := max(6*n, rg.e.n(2000), 1)
		elapsed, err := rg.flood(ctx, ids, m, before.events+uint64(m)*per.events)
		if perr := stopProfile(); err == nil {
			err = perr
		}
		if err != nil {
			return err
		}
		r.Throughput(name, m, elapsed, bench.Field("sessions", n))
	}
	return nil
}

// calibrate measures the writes of one plain delivery on an idle session.
func (rg *rig) calibrate(ctx context.Context, id string) (writeCounts, error) {
	if _, err := rg.deliverAndWait(ctx, id); err != nil { // warm the session
		return writeCounts{}, err
	}
	if err := rg.settle(ctx); err != nil {
		return writeCounts{}, err
	}
	before, err := rg.counts(ctx)
	if err != nil {
		return writeCounts{}, err
	}
	if _, err := rg.deliverAndWait(ctx, id); err != nil {
		return writeCounts{}, err
	}
	if err := rg.settle(ctx); err != nil {
		return writeCounts{}, err
	}
	after, err := rg.counts(ctx)
	return after.sub(before), err
}

// settle waits until the event stream stops growing for 200 ms.
func (rg *rig) settle(ctx context.Context) error {
	last, stable := uint64(0), 0
	for stable < 10 {
		c, err := rg.counts(ctx)
		if err != nil {
			return err
		}
		if c.events == last {
			stable++
		} else {
			last, stable = c.events, 0
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// flood publishes m deliveries round-robin (async) and waits until the
// event stream reaches wantEvents.
func (rg *rig) flood(ctx context.Context, ids []string, m int, wantEvents uint64) (time.Duration, error) {
	start := time.Now()
	for i := range m {
		id := nextID()
		data, err := deliverCmd(id, "flood "+id)
		if err != nil {
			return 0, err
		}
		if err := publishAsync(rg.e.js, rg.names.Inbox(ids[i%len(ids)]), data, jetstream.WithMsgID(id)); err != nil {
			return 0, err
		}
	}
	<-rg.e.js.PublishAsyncComplete()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		c, err := rg.counts(ctx)
		if err != nil {
			return 0, err
		}
		if c.events >= wantEvents {
			return time.Since(start), nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0, fmt.Errorf("flood did not complete")
}

// benchRawPattern does per delivery exactly the writes Baton does (one inbox
// publish, the record CASes, the event appends with an expected subject
// sequence), one chain per session, all sessions concurrently.
func benchRawPattern(ctx context.Context, e *env, r *bench.Reporter, sessions, m int, per writeCounts) error {
	raw, err := newRawPattern(ctx, e, sessions)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errc := make(chan error, sessions)
	start := time.Now()
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := s; i < m; i += sessions {
				if err := raw.delivery(ctx, s, per); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return err
	}
	r.Throughput("raw_delivery_pattern", m, time.Since(start), bench.Field("sessions", sessions),
		bench.Field("writes", per.total()), bench.Field("pattern", "frozen"))
	return nil
}
