package main

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/proctest"
)

const pkg = "github.com/baton-rt/baton/cmd/owner"

func TestBadDeploymentIDExits2(t *testing.T) {
	bin := proctest.Build(t, pkg)
	for _, tc := range []struct {
		name, reason string
		args         []string
	}{
		{"latest", `"latest" is not an exact deployment`, []string{"--deployment-id", "latest"}},
		{"dotted", `"v1.2" must match`, []string{"--deployment-id", "v1.2"}},
		{"missing", "empty (an exact deployment ID is required)", nil},
		{"empty", "empty (an exact deployment ID is required)", []string{"--deployment-id="}},
		{"bad prefix", "--prefix", []string{"--deployment-id", "v1", "--prefix", "A.B"}},
		{"bad log level", "--log-level", []string{"--deployment-id", "v1", "--log-level", "loud"}},
		{"fractional lease TTL", "--lease-ttl", []string{"--deployment-id", "v1", "--lease-ttl", "1500ms"}},
		{"zero replicas", "--replicas 0", []string{"--deployment-id", "v1", "--replicas", "0"}},
		{"replicas without a cluster", "needs a cluster", []string{"--deployment-id", "v1", "--replicas", "3"}},
		{"unknown fault", "unknown fault point", []string{"--deployment-id", "v1", "--fault", "crash-after-lunch"}},
		{"bad fault count", "N must be a positive integer", []string{"--deployment-id", "v1", "--fault", "crash-after-commit:0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := proctest.Start(t, bin, tc.args...)
			if code := p.Wait(t, 30*time.Second); code != 2 {
				t.Fatalf("exit code %d, want 2\n%s", code, p.Output())
			}
			if !p.Contains(tc.reason) || !strings.HasPrefix(p.Output(), "owner: ") {
				t.Fatalf("stderr does not give the reason %q:\n%s", tc.reason, p.Output())
			}
		})
	}
}

func TestEmbeddedServerCleanShutdown(t *testing.T) {
	bin := proctest.Build(t, pkg)
	dir := t.TempDir()
	p := proctest.Start(t, bin, "--deployment-id", "v1", "--data-dir", dir, "--nats-listen", "127.0.0.1:-1", "--log-format", "json",
		"--metrics-listen", "127.0.0.1:0")
	ready := p.WaitLog(t, "owner ready", 60*time.Second)
	m := p.WaitLog(t, "owner metrics", 10*time.Second)
	base := "http://" + m["listen"].(string)
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready",
		"/metrics": "baton_owner_lease_renewals_total"} {
		var body string
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(body, want) && time.Now().Before(deadline) {
			body = httpGet(t, base+path)
			time.Sleep(100 * time.Millisecond) // renewals start a lease period in
		}
		if !strings.Contains(body, want) {
			t.Fatalf("GET %s: %q lacks %q", path, body, want)
		}
	}
	url, _ := ready["nats"].(string)
	_, js := natstest.Connect(t, url)
	if _, err := js.Stream(t.Context(), "BATON_INBOX"); err != nil {
		t.Fatalf("topology missing on the embedded server: %v", err)
	}
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM\n%s", code, p.Output())
	}
	p.WaitLog(t, "owner shutting down", time.Second)
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
