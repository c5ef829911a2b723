package ingress

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Pending is one request the ingress is serving, as Drain reports it when
// a drain ends before the request did.
type Pending struct {
	Via       string    // "http" or "nats"
	Op        string    // the route pattern or the NATS operation
	Path      string    // the URL path (no query) or the NATS subject
	SessionID string    // the session the route names, if any
	Since     time.Time // when the request arrived
}

// inflight counts the requests being served, for a drain to wait for.
type inflight struct {
	gauge prometheus.Gauge // baton_ingress_requests_in_flight
	mu    sync.Mutex
	next  uint64
	reqs  map[uint64]Pending
	zero  chan struct{} // closed when reqs becomes empty; nil while empty
}

// begin records r; the returned func ends it.
func (f *inflight) begin(r Pending) (end func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reqs == nil {
		f.reqs = map[uint64]Pending{}
	}
	if len(f.reqs) == 0 {
		f.zero = make(chan struct{})
	}
	f.next++
	id := f.next
	f.reqs[id] = r
	f.gauge.Inc()
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.reqs, id)
		f.gauge.Dec()
		if len(f.reqs) == 0 {
			close(f.zero)
			f.zero = nil
		}
	}
}

// wait returns nil once no request runs, or the requests still running
// when ctx ends, oldest first.
func (f *inflight) wait(ctx context.Context) []Pending {
	for {
		f.mu.Lock()
		zero := f.zero
		if zero == nil {
			f.mu.Unlock()
			return nil
		}
		f.mu.Unlock()
		select {
		case <-zero:
		case <-ctx.Done():
			return f.running()
		}
	}
}

func (f *inflight) running() []Pending {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Pending, 0, len(f.reqs))
	for _, r := range f.reqs {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Since.Before(out[j].Since) })
	return out
}

// Drain waits until no HTTP or NATS request is being served, or ctx ends;
// then it returns the requests still running (none: nil). Call it after
// the listeners stopped taking requests (http.Server.Shutdown, the micro
// service's Stop) and after Close, which ends the event streams.
func (s *Server) Drain(ctx context.Context) []Pending { return s.busy.wait(ctx) }
