package app

import (
	"fmt"
	"log/slog"
	neturl "net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Connect opens a NATS connection that reconnects forever and logs its state
// changes.
func Connect(url, name string, log *slog.Logger) (*nats.Conn, error) {
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
	)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", Redact(url), err)
	}
	return nc, nil
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
