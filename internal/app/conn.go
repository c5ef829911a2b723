package app

import (
	"errors"
	"fmt"
	"log/slog"
	neturl "net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// Connect opens a NATS connection that reconnects forever and logs its state
// changes and its asynchronous errors; m (nil: none) counts the latter.
func Connect(url, name string, log *slog.Logger, m *ConnMetrics) (*nats.Conn, error) {
	nc, err := nats.Connect(url,
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond),
		// A connection whose peer vanished (a network partition: no RST,
		// no FIN) is only noticed by missed pings. The library's default
		// (every 2 min, 2 outstanding) keeps a dead connection for minutes,
		// so an owner cut off and reconnected would stay fenced that long;
		// here it reconnects within about 3 × pingInterval.
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(2),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("nats disconnected", KeyErr, err)
			}
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("nats reconnected", "url", c.ConnectedUrlRedacted())
		}),
		nats.ErrorHandler(asyncError(log, m)),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", Redact(url), err)
	}
	return nc, nil
}

// ConnMetrics counts a connection's asynchronous errors, by kind:
// slow_consumer (a subscription's pending limit or channel was full and the
// library dropped messages), permission (a publish or subscribe the
// server refused), other.
type ConnMetrics struct {
	errs *prometheus.CounterVec
}

// NewConnMetrics returns the counters, unregistered: Collector is
// registered once the process's registry exists.
func NewConnMetrics() *ConnMetrics {
	return &ConnMetrics{errs: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_nats_async_errors_total",
		Help: "Asynchronous errors of the process's NATS connection by kind: slow_consumer " +
			"(a subscription fell behind and messages were dropped; counted once each time one starts dropping), " +
			"permission, other.",
	}, []string{"kind"})}
}

// Collector is what to register.
func (m *ConnMetrics) Collector() prometheus.Collector { return m.errs }

// asyncError logs an asynchronous error of the connection with the
// subscription it concerns (subject, kind, messages dropped so far) and
// counts it. The library calls it when a subscription starts dropping,
// not for every message dropped.
func asyncError(log *slog.Logger, m *ConnMetrics) nats.ErrHandler {
	return func(_ *nats.Conn, sub *nats.Subscription, err error) {
		kind := "other"
		switch {
		case errors.Is(err, nats.ErrSlowConsumer):
			kind = "slow_consumer"
		case errors.Is(err, nats.ErrPermissionViolation):
			kind = "permission"
		}
		if m != nil {
			m.errs.WithLabelValues(kind).Inc()
		}
		if log == nil {
			return
		}
		attrs := []any{KeyErr, err, "kind", kind}
		if sub != nil {
			attrs = append(attrs, "subject", sub.Subject, "subscription", subscriptionType(sub.Type()))
			if n, derr := sub.Dropped(); derr == nil {
				attrs = append(attrs, "dropped", n)
			}
			if msgs, _, perr := sub.Pending(); perr == nil {
				attrs = append(attrs, "pending", msgs)
			}
		}
		log.Warn("nats asynchronous error", attrs...)
	}
}

func subscriptionType(t nats.SubscriptionType) string {
	switch t {
	case nats.AsyncSubscription:
		return "async"
	case nats.SyncSubscription:
		return "sync"
	case nats.ChanSubscription:
		return "chan"
	case nats.PullSubscription:
		return "pull"
	default:
		return "unknown"
	}
}

// Redact is a comma-separated list of NATS URLs with any password
// replaced by "xxxxx", for errors and logs.
func Redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if u, err := neturl.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
			parts[i] = u.Redacted()
		}
	}
	return strings.Join(parts, ",")
}

// pingInterval paces client pings: about the lease TTL, so a partitioned
// connection is replaced soon after the lease it held expired.
const pingInterval = 2 * time.Second
