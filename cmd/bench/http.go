package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/baton-rt/baton/ingress"
	"github.com/baton-rt/baton/internal/bench"
	"github.com/baton-rt/baton/internal/stages"
)

// benchHTTP: the ingress over real HTTP on loopback, against an in-process
// owner: 64 concurrent clients posting deliveries, and POST → the echo's
// message.output on SSE for one session.
func benchHTTP(ctx context.Context, e *env, r *bench.Reporter) error {
	rg, err := newRig(ctx, e)
	if err != nil {
		return err
	}
	defer rg.close()
	srv, err := ingress.New(ingress.Config{NC: e.nc, JS: e.js, Deployment: "bench", InsecureDev: true, Log: benchLogger()})
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	defer hs.Close()
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}}
	if err := benchHTTPDelivery(ctx, rg, r, client, base); err != nil {
		return err
	}
	return benchHTTPToEvent(ctx, rg, r, client, base)
}

func post(client *http.Client, url, body string) (int, []byte, error) {
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func benchHTTPDelivery(ctx context.Context, rg *rig, r *bench.Reporter, client *http.Client, base string) error {
	const clients = 64
	ids, err := rg.startSessions(16)
	if err != nil {
		return err
	}
	per := max(rg.e.n(4000)/clients, 10)
	var mu sync.Mutex
	var samples []time.Duration
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				body := fmt.Sprintf(`{"sessionId":%q,"text":"load %d-%d"}`, ids[(c+i)%len(ids)], c, i)
				t0 := time.Now()
				code, b, err := post(client, base+"/v1/deliveries", body)
				d := time.Since(t0)
				mu.Lock()
				if err == nil && code != http.StatusAccepted {
					err = fmt.Errorf("delivery: %d %s", code, b)
				}
				if err != nil && firstErr == nil {
					firstErr = err
				}
				samples = append(samples, d)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	r.Latencies("http_delivery", samples, time.Since(start), bench.Baseline("js_publish_sync"), bench.Field("clients", clients))
	return nil
}

// benchHTTPToEvent posts a delivery and waits for its echo on an SSE stream
// that stays open across the whole run.
func benchHTTPToEvent(ctx context.Context, rg *rig, r *bench.Reporter, client *http.Client, base string) error {
	id, err := rg.startSession()
	if err != nil {
		return err
	}
	lines, closeLines, err := openLines(ctx, client, base+"/v1/sessions/"+id+"/events")
	if err != nil {
		return err
	}
	defer closeLines()
	n := rg.e.n(300)
	samples := make([]time.Duration, 0, n)
	var sizes recordSizes
	for i := range n + 10 {
		text := fmt.Sprintf("echo-%d", i)
		t0 := time.Now()
		stages.Start(id)
		if code, b, err := post(client, base+"/v1/deliveries", fmt.Sprintf(`{"sessionId":%q,"text":%q}`, id, text)); err != nil || code != http.StatusAccepted {
			return fmt.Errorf("delivery: %d %s %v", code, b, err)
		}
		stages.Mark(id, "http.accepted")
		if err := waitLine(lines, `"text":"`+text+`"`); err != nil {
			return err
		}
		stages.Mark(id, "sse.line")
		if i >= 10 {
			samples = append(samples, time.Since(t0))
		}
		if err := waitLine(lines, `"session.waiting"`); err != nil { // the turn settled
			return err
		}
		if err := sizes.sample(ctx, rg.e, id, i); err != nil {
			return err
		}
	}
	r.Latencies("http_delivery_to_event", samples, 0, bench.Baseline("js_publish_sync"), bench.Field("record_bytes", sizes.mean()))
	stages.Report(os.Stderr, "http_delivery_to_event") // a build with -tags batonstages only
	return floorHTTP(ctx, rg.e, r, sizes.mean())
}

// openLines opens a stream of lines (SSE) that stays open until closed.
func openLines(ctx context.Context, client *http.Client, url string) (<-chan string, func(), error) {
	sctx, cancel := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, url, nil)
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines, func() { cancel(); resp.Body.Close() }, nil
}

func waitLine(lines <-chan string, want string) error {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return fmt.Errorf("SSE stream closed")
			}
			if bytes.Contains([]byte(l), []byte(want)) {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("no SSE line with %s", want)
		}
	}
}
