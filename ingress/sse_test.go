package ingress_test

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/harness"
	"github.com/baton-rt/baton/internal/testsize"
	"github.com/baton-rt/baton/wire"
)

// A client that reconnects with Last-Event-ID gets every later event once:
// no gap, no duplicate. The hub's ring is 2 events here, so resuming reads
// the stream (direct gets, binary search on the cursor).
func TestSSEResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ingress.Config) { c.HubRing = 2 })
	e.owner("v1", "p1")
	id := e.create(`{"alias":"resume"}`).SessionID
	e.create(`{"alias":"noise"}`) // its events interleave in the stream
	for i := range 5 {
		e.deliver(fmt.Sprintf(`{"alias":"resume","text":"m%d"}`, i))
		e.deliver(fmt.Sprintf(`{"alias":"noise","text":"n%d"}`, i))
	}
	e.waitEvents(id, "5 outputs", func(evs []wire.Event) bool { return len(harness.Outputs(evs)) == 5 })

	c1 := e.sse("/v1/sessions/" + id + "/events")
	got := until(t, c1, 10*time.Second, "m2", isOutput("m2"))
	c1.Close()
	cursor := got[len(got)-1].ID
	for i := 5; i < 8; i++ {
		e.deliver(fmt.Sprintf(`{"alias":"resume","text":"m%d"}`, i))
		e.deliver(fmt.Sprintf(`{"alias":"noise","text":"n%d"}`, i))
	}
	// Last-Event-ID wins over ?after (a browser reconnects with its URL).
	c2 := e.sse("/v1/sessions/"+id+"/events?after=0", "Last-Event-ID", strconv.FormatUint(cursor, 10))
	got = append(got, until(t, c2, 10*time.Second, "m7", isOutput("m7"))...)
	e.deliver(`{"alias":"resume","text":"live"}`)
	got = append(got, until(t, c2, 10*time.Second, "live", isOutput("live"))...)
	for i, ev := range got {
		if ev.ID != uint64(i+1) {
			t.Fatalf("event %d has id %d: gap or duplicate across the reconnect at %d", i, ev.ID, cursor)
		}
	}
	// ?after=N in the middle, and the whole history with a ring of 2.
	mid := got[len(got)/2].ID
	c3 := e.sse(fmt.Sprintf("/v1/sessions/%s/events?after=%d", id, mid))
	tail := until(t, c3, 10*time.Second, "live", isOutput("live"))
	if tail[0].ID != mid+1 || tail[len(tail)-1].ID != got[len(got)-1].ID {
		t.Fatalf("?after=%d returned %d..%d", mid, tail[0].ID, tail[len(tail)-1].ID)
	}
	e.eventually(5*time.Second, "a heartbeat", func() bool {
		return c3.Pings() > 0
	})
	// Every cursor, located by binary search among interleaved events.
	all := e.waitEvents(id, "the last turn settled", func(evs []wire.Event) bool {
		return evs[len(evs)-1].Kind == wire.EventSessionWaiting && len(harness.Outputs(evs)) == 9
	})
	end := all[len(all)-1].Seq
	for k := uint64(0); k <= end; k++ {
		if evs := e.events(id, k); uint64(len(evs)) != end-k || len(evs) > 0 && evs[0].Seq != k+1 {
			t.Fatalf("?after=%d&follow=false returned %d events", k, len(evs))
		}
	}
	if evs := e.events(id, got[len(got)-1].ID+100); len(evs) != 0 {
		t.Fatalf("?after past the end returned %d events", len(evs))
	}
}

// Many SSE clients on many sessions: each receives every event exactly
// once, while BATON_EVENTS carries one consumer per watched session (the
// hub's), never one per client.
func TestSSEScale(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	nSessions, nClients := testsize.Pick(20, 100), testsize.Pick(200, 1000)
	const deliveries = 3
	ids := make([]string, nSessions)
	for i := range ids {
		ids[i] = e.create(fmt.Sprintf(`{"alias":"scale-%d"}`, i)).SessionID
	}
	type reader struct {
		id   string
		c    *harness.Stream
		mu   sync.Mutex
		seen []uint64
	}
	readers := make([]*reader, nClients)
	for i := range readers {
		r := &reader{id: ids[i%nSessions]}
		r.c = e.sse("/v1/sessions/" + r.id + "/events")
		go func() {
			for ev := range r.c.Frames() {
				r.mu.Lock()
				r.seen = append(r.seen, ev.ID)
				r.mu.Unlock()
			}
		}()
		readers[i] = r
	}
	limit := nSessions + 3
	checkConsumers(t, e, limit)
	var wg sync.WaitGroup
	for _, id := range ids {
		for j := range deliveries {
			wg.Go(func() { e.deliver(fmt.Sprintf(`{"sessionId":"%s","text":"d%d"}`, id, j)) })
		}
	}
	wg.Wait()
	final := map[string]uint64{}
	for _, id := range ids {
		evs := e.waitEvents(id, "every delivery settled", func(evs []wire.Event) bool {
			return harness.Count(evs, wire.EventTurnCompleted) == deliveries && evs[len(evs)-1].Kind == wire.EventSessionWaiting
		})
		final[id] = evs[len(evs)-1].Seq
	}
	checkConsumers(t, e, limit)
	for i, r := range readers {
		e.eventually(20*time.Second, fmt.Sprintf("client %d to read %d events", i, final[r.id]), func() bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			return len(r.seen) >= int(final[r.id])
		})
		r.mu.Lock()
		for j, seq := range r.seen {
			if seq != uint64(j+1) {
				t.Fatalf("client %d of %s: event %d has seq %d (every event exactly once, in order)", i, r.id, j, seq)
			}
		}
		r.mu.Unlock()
	}
	checkConsumers(t, e, limit)
}

func checkConsumers(t *testing.T, e *env, limit int) {
	t.Helper()
	st, err := e.JS.Stream(t.Context(), e.Names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers > limit {
		t.Fatalf("%s has %d consumers, want at most %d", e.Names.EventsStream(), info.State.Consumers, limit)
	}
}

// Hubs stop (and delete their consumer) after their last client left and
// the linger passed.
func TestHubLinger(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.owner("v1", "p1")
	id := e.create(`{"text":"x"}`).SessionID
	c := e.sse("/v1/sessions/" + id + "/events")
	until(t, c, 10*time.Second, "x", isOutput("x"))
	c.Close()
	e.eventually(10*time.Second, "no consumer left on the events stream", func() bool {
		st, _ := e.JS.Stream(t.Context(), e.Names.EventsStream())
		info, err := st.Info(t.Context())
		return err == nil && info.State.Consumers == 0
	})
	if code, _ := e.call(http.MethodGet, "/v1/sessions/"+id+"/events?follow=false", "", testToken); code != 200 {
		t.Fatalf("follow=false = %d", code)
	}
}

// A client whose queue overflows (ClientQueue 1 here) is neither dropped
// nor blocking its hub: it catches up from the stream, in order, once.
func TestSSESlowClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ingress.Config) { c.ClientQueue = 1 })
	e.owner("v1", "p1")
	id := e.create(`{"alias":"slow"}`).SessionID
	c := e.sse("/v1/sessions/" + id + "/events")
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() { e.deliver(fmt.Sprintf(`{"alias":"slow","text":"s%d"}`, i)) })
	}
	wg.Wait()
	evs := e.waitEvents(id, "10 outputs", func(evs []wire.Event) bool {
		return harness.Count(evs, wire.EventTurnCompleted) == 10 && evs[len(evs)-1].Kind == wire.EventSessionWaiting
	})
	last := evs[len(evs)-1].Seq
	got := until(t, c, 10*time.Second, "the last event", func(ev harness.Frame) bool { return ev.ID == last })
	for i, ev := range got {
		if ev.ID != uint64(i+1) {
			t.Fatalf("event %d has id %d", i, ev.ID)
		}
	}
}
