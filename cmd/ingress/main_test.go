package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/app"
	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/proctest"
	"github.com/baton-rt/baton/internal/topology"
)

const pkg = "github.com/baton-rt/baton/cmd/ingress"

func TestUsageErrorsExit2(t *testing.T) {
	bin := proctest.Build(t, pkg)
	for _, tc := range []struct {
		name, reason string
		args         []string
	}{
		{"latest", `"latest" is not an exact deployment`, []string{"--deployment-id", "latest", "--insecure-dev"}},
		{"missing", "empty", []string{"--insecure-dev"}},
		{"no auth", "--auth-token-file is required", []string{"--deployment-id", "v1"}},
		{"empty token file", "holds no token", []string{"--deployment-id", "v1", "--auth-token-file", emptyFile(t)}},
		{"missing token file", "--auth-token-file", []string{"--deployment-id", "v1", "--auth-token-file", "/nonexistent/tokens"}},
		{"empty admin token file", "--admin-token-file", []string{"--deployment-id", "v1", "--insecure-dev", "--admin-token-file", emptyFile(t)}},
		{"bad listen address", "--listen", []string{"--deployment-id", "v1", "--insecure-dev", "--listen", "nope"}},
		{"listen port out of range", "--listen", []string{"--deployment-id", "v1", "--insecure-dev", "--listen", "127.0.0.1:70000"}},
		{"zero body limit", "--max-body-bytes", []string{"--deployment-id", "v1", "--insecure-dev", "--max-body-bytes", "0"}},
		{"unparsable body limit", `invalid value "lots" for flag -max-body-bytes`, []string{"--deployment-id", "v1", "--insecure-dev", "--max-body-bytes", "lots"}},
		{"zero finish wait", "--finish-wait 0s: want a positive duration", []string{"--deployment-id", "v1", "--insecure-dev", "--finish-wait", "0"}},
		{"bad ended alias", `--ended-alias "reuse": want gone or new`, []string{"--deployment-id", "v1", "--insecure-dev", "--ended-alias", "reuse"}},
		{"empty NATS URL", "--nats-url", []string{"--deployment-id", "v1", "--insecure-dev", "--nats-url", ""}},
		{"bad log level", "--log-level", []string{"--deployment-id", "v1", "--insecure-dev", "--log-level", "loud"}},
		{"unknown flag", "flag provided but not defined", []string{"--deployment-id", "v1", "--insecure-dev", "--colour"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := proctest.Start(t, bin, tc.args...)
			if code := p.Wait(t, 30*time.Second); code != 2 || !p.Contains(tc.reason) || !strings.HasPrefix(p.Output(), "ingress: ") {
				t.Fatalf("exit %d, want 2 with %q:\n%s", code, tc.reason, p.Output())
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	bin := proctest.Build(t, pkg)
	for _, tc := range []struct {
		arg, want string
	}{{"--help", "Usage: ingress [flags]"}, {"-help", "-admin-token-file"}, {"--version", "revision "}} {
		var stdout, stderr strings.Builder
		cmd := exec.Command(bin, tc.arg)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 || !strings.Contains(stdout.String(), tc.want) {
			t.Errorf("ingress %s: %v, stdout %q, stderr %q; want exit 0 and %q on stdout", tc.arg, err, stdout.String(), stderr.String(), tc.want)
		}
	}
}

func TestHealthAndReadiness(t *testing.T) {
	s := natstest.Server(t)
	_, js := natstest.Connect(t, s.ClientURL())
	bin := proctest.Build(t, pkg)
	addr := freeAddr(t)
	p := proctest.Start(t, bin, "--deployment-id", "v1", "--insecure-dev", "--nats-url", s.ClientURL(), "--listen", addr, "--log-format", "json")
	p.WaitLog(t, "ingress ready", 30*time.Second)
	if code, _ := get(t, "http://"+addr+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("readyz before topology = %d, want 503", code)
	}
	if _, err := topology.Ensure(t.Context(), js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/metrics": 200} {
		if code, body := get(t, "http://"+addr+path); code != want {
			t.Errorf("%s = %d %s", path, code, body)
		}
	}
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, p.Output())
	}
}

// With --auth-token-file the API wants one of its tokens; the probes do not.
func TestBearerTokens(t *testing.T) {
	s := natstest.Server(t)
	_, js := natstest.Connect(t, s.ClientURL())
	if _, err := topology.Ensure(t.Context(), js, topology.Config{}); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("# channel services\nsecret-1\n\nsecret-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := proctest.Build(t, pkg)
	addr := freeAddr(t)
	p := proctest.Start(t, bin, "--deployment-id", "v1", "--auth-token-file", tokens, "--nats-url", s.ClientURL(), "--listen", addr, "--log-format", "json")
	p.WaitLog(t, "ingress ready", 30*time.Second)
	for _, tc := range []struct {
		token string
		want  int
	}{{"", 401}, {"wrong", 401}, {"secret-2", 404}} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/sessions/01JZZZZZZZZZZZZZZZZZZZZZZZ", nil)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want || !strings.Contains(string(b), `"code"`) {
			t.Fatalf("token %q: %d %s, want %d", tc.token, resp.StatusCode, b, tc.want)
		}
	}
	if code, body := get(t, "http://"+addr+"/readyz"); code != 200 {
		t.Fatalf("readyz = %d %s", code, body)
	}
	// Without --admin-token-file the admin routes are disabled.
	adminGet := func(addr, token string, want int, code string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/admin/deployments", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || code != "" && !strings.Contains(string(b), `"code":"`+code+`"`) {
			t.Fatalf("admin token %q: %d %s, want %d %s", token, resp.StatusCode, b, want, code)
		}
	}
	adminGet(addr, "secret-1", 403, "admin_disabled")
	// With it, its tokens (and only they) reach the admin routes.
	admins := filepath.Join(t.TempDir(), "admins")
	if err := os.WriteFile(admins, []byte("op-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr2 := freeAddr(t)
	p2 := proctest.Start(t, bin, "--deployment-id", "v1", "--auth-token-file", tokens, "--admin-token-file", admins,
		"--nats-url", s.ClientURL(), "--listen", addr2, "--log-format", "json")
	p2.WaitLog(t, "ingress ready", 30*time.Second)
	adminGet(addr2, "secret-1", 401, "unauthorized")
	adminGet(addr2, "op-1", 200, "")
}

func emptyFile(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(path, []byte("# no tokens yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprintf("127.0.0.1:%d", l.Addr().(*net.TCPAddr).Port)
}

// The browser flags: --cors-origin (repeatable, checked), the stream token
// key file (one or two keys of at least 32 bytes) and --stream-token-ttl
// (0 < ttl <= 1h). Each bad value is a usage error naming its flag.
func TestBrowserFlags(t *testing.T) {
	long := strings.Repeat("k", 32)
	keyFile := func(content string) string {
		path := filepath.Join(t.TempDir(), "stream-keys")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	base := []string{"--deployment-id", "v1", "--insecure-dev"}
	cfg, err := parseFlags(append(base, "--cors-origin", "https://app.example.com", "--cors-origin", "http://localhost:3000",
		"--stream-token-key-file", keyFile("# signing\n"+long+"\n"+long+"-previous\n"), "--stream-token-ttl", "90s"))
	if err != nil {
		t.Fatal(err)
	}
	if b := cfg.Browser; strings.Join(b.CORSOrigins, " ") != "https://app.example.com http://localhost:3000" ||
		len(b.StreamTokenKeys) != 2 || string(b.StreamTokenKeys[0]) != long || string(b.StreamTokenKeys[1]) != long+"-previous" ||
		b.StreamTokenTTL != 90*time.Second {
		t.Fatalf("browser config %+v", b)
	}
	if cfg, err := parseFlags(append(base, "--stream-token-key-file", keyFile(long+"\n"))); err != nil ||
		len(cfg.Browser.StreamTokenKeys) != 1 || cfg.Browser.StreamTokenTTL != 5*time.Minute || len(cfg.Browser.CORSOrigins) != 0 {
		t.Fatalf("one key: %+v %v", cfg.Browser, err)
	}
	if cfg, err := parseFlags(base); err != nil || cfg.Browser.StreamTokenKeys != nil || cfg.Browser.CORSOrigins != nil {
		t.Fatalf("no browser flags: %+v %v", cfg.Browser, err)
	}
	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"three keys", "want 1 or 2", []string{"--stream-token-key-file", keyFile(long + "\n" + long + "\n" + long + "\n")}},
		{"short key", "key 1 is 31 bytes: want at least 32", []string{"--stream-token-key-file", keyFile(long[1:] + "\n")}},
		{"no key", "holds no key", []string{"--stream-token-key-file", keyFile("# none\n")}},
		{"missing key file", "--stream-token-key-file", []string{"--stream-token-key-file", "/nonexistent/keys"}},
		{"zero ttl", "--stream-token-ttl 0s", []string{"--stream-token-ttl", "0"}},
		{"long ttl", "--stream-token-ttl 2h0m0s: want a positive duration of at most 1h0m0s", []string{"--stream-token-ttl", "2h"}},
		{"wildcard origin", "-cors-origin", []string{"--cors-origin", "*"}},
		{"origin with a path", "no path", []string{"--cors-origin", "https://app.example.com/"}},
		{"upper-case origin", `"https://app.example.com"`, []string{"--cors-origin", "https://APP.example.com"}},
	} {
		_, err := parseFlags(append(base, tc.args...))
		if !errors.Is(err, app.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a usage error with %q", tc.name, err, tc.want)
		}
	}
}
