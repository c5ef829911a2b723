package main

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/internal/topology"
)

// A request whose body is still arriving keeps the ingress busy: the test
// sends its headers and half its body, and waits until the ingress counts
// it in flight.
func halfRequest(t *testing.T, p *proctest.Proc, addr string) (net.Conn, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	body := `{"sessionId":"01M8TTK0CXS7B6RZ11QW0KPNGJ","text":"hi"}`
	head := "POST /v1/deliveries HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(len(body)) + "\r\n\r\n"
	if _, err := conn.Write([]byte(head + body[:10])); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(metrics(t, addr), "baton_ingress_requests_in_flight 1") {
		if time.Now().After(deadline) {
			t.Fatalf("the half-sent request is not in flight\n%s", p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return conn, body[10:]
}

func metrics(t *testing.T, addr string) string {
	t.Helper()
	_, body := get(t, "http://"+addr+"/metrics")
	return body
}

func startIngress(t *testing.T, args ...string) (*proctest.Proc, string) {
	t.Helper()
	s := natstest.Server(t)
	_, js := natstest.Connect(t, s.ClientURL())
	if _, err := topology.Ensure(t.Context(), js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := proctest.Start(t, proctest.Build(t, pkg), append([]string{"--deployment-id", "v1", "--insecure-dev",
		"--nats-url", s.ClientURL(), "--listen", addr, "--log-format", "json"}, args...)...)
	p.WaitLog(t, "ingress ready", 30*time.Second)
	return p, addr
}

// SIGHUP drains the ingress like SIGTERM: it stops taking connections, lets
// the request in flight finish (its answer reaches the client) and exits 0.
func TestSIGHUPDrainsIngress(t *testing.T) {
	p, addr := startIngress(t, "--drain-timeout", "30s")
	conn, rest := halfRequest(t, p, addr)
	if err := p.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.WaitLog(t, "ingress draining: no new requests; waiting for the ones in flight", 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break // the listener is closed: no new requests
		}
		_ = c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the draining ingress still accepts connections")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := conn.Write([]byte(rest)); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the request in flight got no answer: %v\n%s", err, p.Output())
	}
	_ = resp.Body.Close()
	if resp.StatusCode/100 == 5 && resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("the request in flight: %d", resp.StatusCode)
	}
	if code := p.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGHUP\n%s", code, p.Output())
	}
	if !strings.Contains(p.Output(), `"msg":"ingress drained"`) {
		t.Fatalf("no drain logged\n%s", p.Output())
	}
}

// A request that does not finish within --drain-timeout is logged by name
// and why, cut off, and the ingress exits 1.
func TestIngressDrainTimeout(t *testing.T) {
	p, addr := startIngress(t, "--drain-timeout", "500ms")
	halfRequest(t, p, addr)
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, 30*time.Second); code != 1 {
		t.Fatalf("exit %d after a drain that timed out, want 1\n%s", code, p.Output())
	}
	left := p.WaitLog(t, "drain left a request", time.Second)
	if left["op"] != "POST /v1/deliveries" || left["path"] != "/v1/deliveries" || left["why"] != "still running at the drain timeout" {
		t.Fatalf("the request left: %v", left)
	}
}
