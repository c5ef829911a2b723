package ingress

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the ingress's Prometheus metrics (GET /metrics).
type metrics struct {
	requests *prometheus.CounterVec   // by transport, route, status
	command  *prometheus.HistogramVec // accepted command latency by kind
	created  prometheus.Counter
	clients  prometheus.Gauge
	hubs     prometheus.Gauge
	blobs    *prometheus.CounterVec // out-of-line output fetches by result
	live     *prometheus.CounterVec // live events by result
	inflight prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_ingress_requests_total",
			Help: "Requests by transport (http, nats), route and status code.",
		}, []string{"transport", "route", "status"}),
		command: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "baton_ingress_command_seconds",
			Help:    "Latency of accepted commands, from parsed request to acknowledged publish, by command kind (deliver = delivery latency).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"kind"}),
		created: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "baton_ingress_sessions_created_total",
			Help: "Sessions this ingress created (POST /v1/sessions and deliveries to new aliases).",
		}),
		clients: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "baton_ingress_sse_clients",
			Help: "Connected SSE clients.",
		}),
		hubs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "baton_ingress_sse_hubs",
			Help: "Event hubs, one per watched session, each with one ordered consumer on the events stream.",
		}),
		blobs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_ingress_blob_fetches_total",
			Help: "Fetches of out-of-line message.output content from the state object store, by result (ok, missing, corrupt, error).",
		}, []string{"result"}),
		live: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "baton_ingress_live_events_total",
			Help: "Live events (message.delta, message.discarded) by result: sent (to one SSE client), dropped (a slow client's live budget was full), late (a delta after its step's durable output, not sent), invalid (a malformed message on a live subject).",
		}, []string{"result"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "baton_ingress_requests_in_flight",
			Help: "HTTP and NATS requests being served (SSE streams included); a drain waits for them.",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.command, m.created, m.clients, m.hubs, m.blobs, m.live, m.inflight} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
