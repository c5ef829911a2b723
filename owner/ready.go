package owner

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// readyProbe is the body announce sends to the start subject: not a valid
// start request, so a responder refuses it (bad_request) and creates
// nothing, but its answer shows that the deployment serves.
var readyProbe = []byte(`{`)

// readyPoll paces the probes.
const readyPoll = 50 * time.Millisecond

// announce calls r.Ready once the deployment's start subject answers, on a
// goroutine of its own; stop ends the probing (if it still runs) and waits
// for the goroutine, Ready included.
func announce(ctx context.Context, nc *nats.Conn, r resolved, url string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		if serving(ctx, nc, r.names.Start(r.DeploymentID)) {
			r.Ready(url)
		}
	})
	return func() { cancel(); wg.Wait() }
}

// serving probes subject until a responder answers (true) or ctx ends.
func serving(ctx context.Context, nc *nats.Conn, subject string) bool {
	t := time.NewTicker(readyPoll)
	defer t.Stop()
	for {
		try, cancel := context.WithTimeout(ctx, time.Second)
		_, err := nc.RequestWithContext(try, subject, readyProbe)
		cancel()
		if err == nil {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}
