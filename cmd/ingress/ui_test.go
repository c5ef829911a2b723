package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/proctest"
)

// --ui is off by default; with it the process serves the inspector at
// /ui/ (without a token, before the topology exists), without it /ui/ is
// the API's 404.
func TestUIFlag(t *testing.T) {
	base := []string{"--deployment-id", "v1", "--insecure-dev"}
	if cfg, err := parseFlags(base); err != nil || cfg.UI {
		t.Fatalf("no --ui: UI %v, %v", cfg.UI, err)
	}
	if cfg, err := parseFlags(append(base, "--ui")); err != nil || !cfg.UI {
		t.Fatalf("--ui: UI %v, %v", cfg.UI, err)
	}
	s := natstest.Server(t)
	bin := proctest.Build(t, pkg)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("secret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	on, off := freeAddr(t), freeAddr(t)
	for addr, flags := range map[string][]string{on: {"--ui"}, off: nil} {
		args := append([]string{"--deployment-id", "v1", "--nats-url", s.ClientURL(), "--listen", addr, "--log-format", "json",
			"--auth-token-file", tokens}, flags...)
		p := proctest.Start(t, bin, args...)
		p.WaitLog(t, "ingress ready", 30*time.Second)
	}
	resp, err := http.Get("http://" + on + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("--ui: GET /ui/ = %d %s, want 200 text/html", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if code, body := get(t, "http://"+off+"/ui/"); code != http.StatusNotFound {
		t.Fatalf("without --ui: GET /ui/ = %d %s, want 404", code, body)
	}
}
