// Command e2e is the smoke test of the compose stack (compose.yaml,
// `make e2e-smoke`): it waits for both deployments' ingresses and owners,
// starts a few sessions through blue's ingress, delivers to each through
// green's ingress, and checks that every session ends on deployment green
// with each command applied exactly once and its events contiguous. It also
// checks that the streams and buckets are R3 and that the channel-service
// NATS user can use the ingress service and nothing else. It talks to a
// running stack only; `go test ./...` never runs it.
//
// With -scenario full (`make e2e`) it runs the whole rolling upgrade under
// traffic and faults instead; see full.go.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
	run := run
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

func run(ctx context.Context, c config) error {
	for _, base := range []string{c.blue, c.green} {
		if err := waitReady(ctx, base); err != nil {
			return err
		}
	}
	log.Printf("both ingresses ready")

	// Start the sessions on blue (retrying while no blue owner answers yet).
	ids := make([]string, c.sessions)
	for i := range ids {
		var r receipt
		body := map[string]any{"alias": fmt.Sprintf("e2e-%d-%d", time.Now().UnixNano(), i), "text": fmt.Sprintf("blue %d", i)}
		if err := retry(ctx, func() error { return call(ctx, "POST", c.blue+"/v1/sessions", body, http.StatusCreated, &r) }); err != nil {
			return fmt.Errorf("create session %d on blue: %w", i, err)
		}
		if r.DeploymentID != c.blueID || !r.Created {
			return fmt.Errorf("create session %d: receipt %+v, want created on %s", i, r, c.blueID)
		}
		ids[i] = r.SessionID
	}
	log.Printf("%d sessions started on %s", len(ids), c.blueID)
	for i, id := range ids {
		if _, err := waitStatus(ctx, c.blue, id, func(s status) bool { return s.DeploymentID == c.blueID && s.Idle }); err != nil {
			return fmt.Errorf("session %d (%s) never idle on %s: %w", i, id, c.blueID, err)
		}
	}
	log.Printf("all idle on %s; delivering through %s's ingress", c.blueID, c.greenID)

	// Deliver through green: the green stamp makes each idle blue session
	// hand off to green. Each delivery is sent twice with one idempotency key.
	seqs := make([]uint64, len(ids))
	for i, id := range ids {
		body := map[string]any{"sessionId": id, "text": fmt.Sprintf("green %d", i), "idempotencyKey": fmt.Sprintf("e2e-%d", i)}
		var first, again receipt
		if err := retry(ctx, func() error { return call(ctx, "POST", c.green+"/v1/deliveries", body, http.StatusAccepted, &first) }); err != nil {
			return fmt.Errorf("deliver to session %d through green: %w", i, err)
		}
		if err := call(ctx, "POST", c.green+"/v1/deliveries", body, http.StatusAccepted, &again); err != nil {
			return fmt.Errorf("repeat delivery to session %d: %w", i, err)
		}
		if first.DeploymentID != c.greenID || again != first {
			return fmt.Errorf("session %d: receipts %+v then %+v, want one receipt stamped %s", i, first, again, c.greenID)
		}
		seqs[i] = first.Seq
	}

	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	for i, id := range ids {
		wg.Go(func() { errs[i] = checkMoved(ctx, c, i, id, seqs[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	log.Printf("%d sessions moved %s → %s, each command applied once", len(ids), c.blueID, c.greenID)

	if c.replicas > 0 {
		if err := checkReplicas(ctx, c); err != nil {
			return err
		}
		log.Printf("every stream and bucket has %d replicas", c.replicas)
	}
	if c.channelURL != "" {
		if err := checkChannelUser(ctx, c, ids[0]); err != nil {
			return err
		}
		log.Printf("channel user: ingress service allowed, inbox subjects refused")
	}
	return nil
}

// checkMoved waits until session id is owned by green and idle, then checks
// its events: contiguous from 1, the green command applied once (with the
// receipt's seq) and echoed once, the blue first message echoed once, and a
// completed handoff.
func checkMoved(ctx context.Context, c config, i int, id string, seq uint64) error {
	st, err := waitStatus(ctx, c.green, id, func(s status) bool { return s.DeploymentID == c.greenID && s.Idle })
	if err != nil {
		return fmt.Errorf("session %d (%s) never idle on %s: %w", i, id, c.greenID, err)
	}
	var evs []event
	if err := call(ctx, "GET", c.green+"/v1/sessions/"+id+"/events?follow=false", nil, http.StatusOK, &evs); err != nil {
		return fmt.Errorf("session %d events: %w", i, err)
	}
	applied, greenOut, blueOut, handoffs := 0, 0, 0, 0
	for n, e := range evs {
		if e.Seq != uint64(n+1) {
			return fmt.Errorf("session %d: event %d has seq %d (not contiguous)", i, n, e.Seq)
		}
		switch e.Kind {
		case "command.applied":
			var d struct{ Seq uint64 }
			_ = json.Unmarshal(e.Data, &d)
			if d.Seq == seq {
				applied++
			}
		case "message.output":
			var d struct{ Text string }
			_ = json.Unmarshal(e.Data, &d)
			switch d.Text {
			case fmt.Sprintf("green %d", i):
				greenOut++
				if e.DeploymentID != c.greenID {
					return fmt.Errorf("session %d: the green message was answered on %s", i, e.DeploymentID)
				}
			case fmt.Sprintf("blue %d", i):
				blueOut++
			}
		case "handoff.completed":
			handoffs++
		}
	}
	if applied != 1 || greenOut != 1 || blueOut != 1 || handoffs != 1 {
		return fmt.Errorf("session %d (%s, state %s, epoch %d): command.applied(seq %d)=%d, green output=%d, blue output=%d, handoff.completed=%d; want 1 each",
			i, id, st.State, st.Epoch, seq, applied, greenOut, blueOut, handoffs)
	}
	return nil
}

func checkReplicas(ctx context.Context, c config) error {
	nc, err := nats.Connect(c.natsURL, nats.Name("baton-e2e"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for _, name := range []string{"BATON_INBOX", "BATON_EVENTS", "BATON_TASKS", "KV_baton_sessions", "KV_baton_hooks", "KV_baton_owners", "KV_baton_receipts", "OBJ_baton_state"} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return fmt.Errorf("stream %s: %w", name, err)
		}
		info := s.CachedInfo()
		if info.Config.Replicas != c.replicas || info.Cluster == nil || len(info.Cluster.Replicas) != c.replicas-1 {
			return fmt.Errorf("stream %s: %d replicas configured, cluster %+v; want %d", name, info.Config.Replicas, info.Cluster, c.replicas)
		}
	}
	return nil
}

// checkChannelUser: the channel-service user may request baton.ingress.*
// and must not publish to an inbox subject.
func checkChannelUser(ctx context.Context, c config, id string) error {
	violations := make(chan error, 4)
	nc, err := nats.Connect(c.channelURL, nats.Name("baton-e2e-channel"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case violations <- err:
			default:
			}
		}))
	if err != nil {
		return err
	}
	defer nc.Close()
	req, _ := json.Marshal(map[string]string{"sessionId": id})
	msg, err := nc.RequestWithContext(ctx, "baton.ingress.status", req)
	if err != nil {
		return fmt.Errorf("channel user: baton.ingress.status: %w", err)
	}
	var st status
	if err := json.Unmarshal(msg.Data, &st); err != nil || st.DeploymentID != c.greenID {
		return fmt.Errorf("channel user: baton.ingress.status answered %s (err %v), want the session on %s", msg.Data, err, c.greenID)
	}
	if err := nc.Publish("baton.inbox."+id, []byte(`{"v":1}`)); err != nil {
		return err
	}
	_ = nc.FlushWithContext(ctx)
	select {
	case err := <-violations:
		if !errors.Is(err, nats.ErrPermissionViolation) {
			return fmt.Errorf("channel user: publish to baton.inbox: %v, want a permissions violation", err)
		}
	case <-time.After(5 * time.Second):
		return errors.New("channel user: a publish to baton.inbox.<id> was not refused")
	}
	return nil
}

type receipt struct {
	SessionID    string `json:"sessionId"`
	DeploymentID string `json:"deploymentId"`
	Created      bool   `json:"created"`
	Seq          uint64 `json:"seq"`
}

type status struct {
	SessionID    string `json:"sessionId"`
	DeploymentID string `json:"deploymentId"`
	Epoch        uint64 `json:"epoch"`
	State        string `json:"state"`
	Idle         bool   `json:"idle"`
	QueueDepth   int    `json:"queueDepth"`
}

type event struct {
	Seq          uint64          `json:"seq"`
	Kind         string          `json:"kind"`
	DeploymentID string          `json:"deploymentId"`
	Data         json.RawMessage `json:"data"`
}

var client = &http.Client{Timeout: 15 * time.Second}

// call sends body as JSON and decodes a `want` answer into out.
func call(ctx context.Context, method, url string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return &httpError{code: resp.StatusCode, body: strings.TrimSpace(string(b))}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

type httpError struct {
	code int
	body string
}

func (e *httpError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.code, e.body) }

// retry repeats f while it fails with a 503 or a transport error (the stack
// is still starting), until ctx ends.
func retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		var he *httpError
		if err == nil || errors.As(err, &he) && he.code != http.StatusServiceUnavailable {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func waitReady(ctx context.Context, base string) error {
	err := retry(ctx, func() error { return call(ctx, "GET", base+"/readyz", nil, http.StatusOK, nil) })
	if err != nil {
		return fmt.Errorf("%s/readyz: %w", base, err)
	}
	return nil
}

// waitStatus polls the session's status until ok holds.
func waitStatus(ctx context.Context, base, id string, ok func(status) bool) (status, error) {
	var last status
	var lastErr error
	for {
		var s status
		lastErr = call(ctx, "GET", base+"/v1/sessions/"+id, nil, http.StatusOK, &s)
		if lastErr == nil {
			if ok(s) {
				return s, nil
			}
			last = s
		}
		select {
		case <-ctx.Done():
			return last, fmt.Errorf("%w (last status %+v, last error %v)", ctx.Err(), last, lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
