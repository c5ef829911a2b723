// Command e2e is the smoke test of the compose stack (compose.yaml,
// `make e2e-smoke`): it waits for both deployments' ingresses and owners,
// starts a few sessions through blue's ingress, delivers to each through
// green's ingress, and checks that every session ends on deployment green
// with each command applied exactly once and its events contiguous. It also
// checks that the streams and buckets are R3 and that the channel-service
// NATS user can use the ingress service and nothing else. It talks to a
// running stack only; `go test ./...` never runs it. See smoke.go.
//
// With -scenario full (`make e2e`) it runs the whole rolling upgrade under
// traffic and faults instead; see full.go.
//
// It observes the stack with internal/harness (HTTP client, record
// watcher, events tail, SSE followers, execution-log tail); the scenario's
// other files hold its steps by concern: compose.go (the stack's
// containers), traffic.go, drain.go, retire.go, faults.go, checks.go and
// report.go.
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"time"
)

type config struct {
	blue, green         string // ingress base URLs
	blueID, greenID     string // their deployment IDs
	natsURL, channelURL string // the system user and the channel-service user
	sessions            int
	replicas            int
	timeout             time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.blue, "blue", "http://127.0.0.1:18081", "ingress of the old deployment")
	flag.StringVar(&c.green, "green", "http://127.0.0.1:18082", "ingress of the new deployment")
	flag.StringVar(&c.blueID, "blue-id", "blue", "deployment ID of -blue")
	flag.StringVar(&c.greenID, "green-id", "green", "deployment ID of -green")
	flag.StringVar(&c.natsURL, "nats-url", "nats://baton:baton@127.0.0.1:14222", "NATS URL of the user owners and ingresses use")
	flag.StringVar(&c.channelURL, "channel-url", "nats://channel:channel@127.0.0.1:14222", "NATS URL of the channel-service user (empty: skip the permission check)")
	flag.IntVar(&c.sessions, "sessions", 5, "sessions to move from blue to green")
	flag.IntVar(&c.replicas, "replicas", 3, "replicas every stream and bucket must have (0: skip the check)")
	flag.DurationVar(&c.timeout, "timeout", 3*time.Minute, "bound on the whole run, readiness included")
	scenario := flag.String("scenario", "smoke", "smoke (make e2e-smoke) or full (make e2e; needs COMPOSE and the e2e override)")
	var fc fullConfig
	flag.StringVar(&fc.adminTokenFile, "admin-token-file", "deploy/e2e/admin-token", "full: the ingresses' admin token file")
	flag.StringVar(&fc.execLogDir, "exec-log-dir", "build/e2e-logs", "full: host directory of the owners' --exec-log files (<process>.jsonl)")
	flag.DurationVar(&fc.leaseTTL, "lease-ttl", 2*time.Second, "full: the owners' --lease-ttl")
	flag.DurationVar(&fc.blueTraffic, "blue-traffic", 15*time.Second, "full: how long traffic goes through blue's ingress before it moves to green's")
	flag.IntVar(&fc.sseStreams, "sse", 5, "full: SSE streams followed on green's ingress from seq 0")
	flag.Parse()
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetPrefix("e2e: ")
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	start := time.Now()
	run := runSmoke
	switch *scenario {
	case "smoke":
	case "full":
		run = func(ctx context.Context, c config) error { return runFull(ctx, c, fc) }
	default:
		log.Fatalf("unknown -scenario %q", *scenario)
	}
	if err := run(ctx, c); err != nil {
		log.Printf("FAIL after %v: %v", time.Since(start).Round(time.Millisecond), err)
		os.Exit(1)
	}
	log.Printf("PASS in %v", time.Since(start).Round(time.Millisecond))
}
