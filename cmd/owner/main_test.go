package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/natstest"
	"github.com/baton-rt/baton/internal/proctest"
)

const pkg = "github.com/baton-rt/baton/cmd/owner"

func TestUsageErrorsExit2(t *testing.T) {
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
		{"unparsable inbox sweep interval", `invalid value "bogus" for flag -inbox-sweep-interval`, []string{"--deployment-id", "v1", "--inbox-sweep-interval", "bogus"}},
		{"inbox sweep interval too long", "--inbox-sweep-interval 10s", []string{"--deployment-id", "v1", "--inbox-sweep-interval", "10s"}},
		{"negative inbox sweep interval", "--inbox-sweep-interval -1s", []string{"--deployment-id", "v1", "--inbox-sweep-interval", "-1s"}},
		{"negative max loaded", "--max-loaded -1", []string{"--deployment-id", "v1", "--max-loaded", "-1"}},
		{"negative idle limit", "--end-idle-after -1s: want 0 (never) or more", []string{"--deployment-id", "v1", "--end-idle-after", "-1s"}},
		{"negative retention", "--retain-ended -1s: want 0 (keep forever) or more", []string{"--deployment-id", "v1", "--retain-ended", "-1s"}},
		{"negative drain timeout", "--drain-timeout -1s", []string{"--deployment-id", "v1", "--drain-timeout", "-1s"}},
		{"short task ack wait", "--task-ack-wait", []string{"--deployment-id", "v1", "--task-ack-wait", "500ms"}},
		{"negative sweep interval", "--sweep-interval", []string{"--deployment-id", "v1", "--sweep-interval", "-1s"}},
		{"zero quarantine after", "--quarantine-after 0", []string{"--deployment-id", "v1", "--quarantine-after", "0"}},
		{"bad quarantine backoff", `invalid value "1s,,5s" for flag -quarantine-backoff`, []string{"--deployment-id", "v1", "--quarantine-backoff", "1s,,5s"}},
		{"negative quarantine backoff", "a negative wait", []string{"--deployment-id", "v1", "--quarantine-backoff", "1s,-5s"}},
		{"bad metrics address", "--metrics-listen", []string{"--deployment-id", "v1", "--metrics-listen", "nope"}},
		{"bad NATS listen address", "--nats-listen", []string{"--deployment-id", "v1", "--nats-listen", "127.0.0.1:99999"}},
		{"bad log format", "--log-format", []string{"--deployment-id", "v1", "--log-format", "xml"}},
		{"unknown flag", "flag provided but not defined: -colour", []string{"--deployment-id", "v1", "--colour"}},
		{"arguments", "unexpected arguments", []string{"--deployment-id", "v1", "extra"}},
		{"NATS only with a deployment", "--nats-only runs a NATS server only", []string{"--nats-only", "--deployment-id", "v1"}},
		{"NATS only with a NATS URL", "do not apply", []string{"--nats-only", "--nats-url", "nats://127.0.0.1:4222"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := proctest.Start(t, bin, tc.args...)
			if code := p.Wait(t, 30*time.Second); code != 2 {
				t.Fatalf("exit code %d, want 2\n%s", code, p.Output())
			}
			if !p.Contains(tc.reason) || !strings.HasPrefix(p.Output(), "owner: ") || !p.Contains("Run 'owner --help'") {
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
	// Durations are Go duration strings, every key once per line.
	if d := p.WaitLog(t, "draining: no new work; hibernating every session", time.Second); d["timeout"] != "30s" {
		t.Errorf("drain line timeout %v, want \"30s\"", d["timeout"])
	}
	checkLines(t, p.Output())
}

// checkLines checks every JSON log line for repeated keys and "<nil>".
func checkLines(t *testing.T, out string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, "<nil>") {
			t.Errorf("a nil value in %s", line)
		}
		dec := json.NewDecoder(strings.NewReader(line))
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Errorf("not a JSON line: %s", line)
			continue
		}
		seen := map[string]bool{}
		for dec.More() {
			tok, _ := dec.Token()
			key, _ := tok.(string)
			if seen[key] {
				t.Errorf("key %q twice in %s", key, line)
			}
			seen[key] = true
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Errorf("%v in %s", err, line)
				break
			}
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	bin := proctest.Build(t, pkg)
	for _, tc := range []struct {
		arg, want string
	}{{"--help", "Usage: owner [flags]"}, {"-h", "-inbox-sweep-interval"}, {"--version", "owner "}} {
		var stdout, stderr strings.Builder
		cmd := exec.Command(bin, tc.arg)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 || !strings.Contains(stdout.String(), tc.want) {
			t.Errorf("owner %s: %v, stdout %q, stderr %q; want exit 0 and %q on stdout", tc.arg, err, stdout.String(), stderr.String(), tc.want)
		}
		if tc.arg == "--version" && (!strings.Contains(stdout.String(), "revision ") || !strings.Contains(stdout.String(), "go1.")) {
			t.Errorf("owner --version = %q, want the module version, revision and Go version", stdout.String())
		}
	}
}

// --nats-only runs the server alone and holds its store's lock: a second
// server on the store, embedded in an owner or alone, is refused at once
// with the holder named, and the first one goes on serving.
func TestNATSOnlyLocksItsStore(t *testing.T) {
	bin := proctest.Build(t, pkg)
	dir := t.TempDir()
	first := proctest.Start(t, bin, "--nats-only", "--data-dir", dir, "--nats-listen", "127.0.0.1:-1", "--log-format", "json")
	ready := first.WaitLog(t, "NATS server ready", 60*time.Second)
	url := ready["url"].(string)
	holder := fmt.Sprintf("pid %d: NATS server", first.Cmd.Process.Pid)
	for name, args := range map[string][]string{
		"NATS only": {"--nats-only", "--data-dir", dir, "--nats-listen", "127.0.0.1:-1", "--log-format", "json"},
		"embedded":  {"--deployment-id", "v1", "--data-dir", dir, "--nats-listen", "127.0.0.1:-1", "--log-format", "json"},
	} {
		p := proctest.Start(t, bin, args...)
		if code := p.Wait(t, 15*time.Second); code != 1 || !p.Contains(holder) || !p.Contains("is in use") {
			t.Errorf("%s on a store in use: exit %d, want 1 naming %q:\n%s", name, code, holder, p.Output())
		}
	}
	nc, _ := natstest.Connect(t, url)
	if err := nc.Flush(); err != nil {
		t.Fatalf("the first server stopped serving: %v", err)
	}
	nc.Close()
	if err := first.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := first.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, first.Output())
	}
	first.WaitLog(t, "NATS server shutting down", time.Second)
	checkLines(t, first.Output())
}

// --lock-file: a second owner with the same lock file exits at once naming
// the first.
func TestLockFile(t *testing.T) {
	s := natstest.Server(t)
	bin := proctest.Build(t, pkg)
	lock := filepath.Join(t.TempDir(), "owner-v1.lock")
	args := []string{"--deployment-id", "v1", "--nats-url", s.ClientURL(), "--lock-file", lock, "--log-format", "json"}
	first := proctest.Start(t, bin, append(args, "--process-id", "p1")...)
	first.WaitLog(t, "owner ready", 60*time.Second)
	second := proctest.Start(t, bin, append(args, "--process-id", "p2")...)
	holder := fmt.Sprintf("pid %d: owner of deployment v1 (process p1)", first.Cmd.Process.Pid)
	if code := second.Wait(t, 15*time.Second); code != 1 || !second.Contains(holder) {
		t.Fatalf("second owner: exit %d, want 1 naming %q:\n%s", code, holder, second.Output())
	}
	if err := first.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := first.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d after SIGTERM\n%s", code, first.Output())
	}
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

// A second Ctrl-C aborts the drain even when the owner was started with
// SIGINT ignored, as a script's background job is (make run): the first
// starts the drain of a running step, the second ends the process at once
// with 130.
func TestSecondInterruptAborts(t *testing.T) {
	s := natstest.Server(t)
	nc, _ := natstest.Connect(t, s.ClientURL())
	bin := proctest.Build(t, pkg)
	execLog := filepath.Join(t.TempDir(), "exec.jsonl")
	p := proctest.Start(t, "bash", "-c", `trap '' INT; exec "$0" "$@"`, bin, "--deployment-id", "v1",
		"--nats-url", s.ClientURL(), "--exec-log", execLog, "--drain-timeout", "1m", "--log-format", "json")
	p.WaitLog(t, "owner serving", 60*time.Second)
	msg, err := nc.Request("baton.deploy.v1.start", []byte(`{"deploymentId":"v1"}`), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var started struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(msg.Data, &started); err != nil || started.SessionID == "" {
		t.Fatalf("start reply %s: %v", msg.Data, err)
	}
	sleep := `{"v":1,"kind":"deliver","id":"c1","acceptedDeploymentId":"v1","acceptedAt":"2026-11-30T00:00:00Z","deliver":{"mode":"queue","payloads":[{"message":"/sleep 30s"}]}}`
	if err := nc.Publish("baton.inbox."+started.SessionID, []byte(sleep)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for b, _ := os.ReadFile(execLog); len(b) == 0; b, _ = os.ReadFile(execLog) {
		if time.Now().After(deadline) {
			t.Fatalf("the step did not start\n%s", p.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := p.Cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	p.WaitLog(t, "draining: no new work; hibernating every session", 10*time.Second)
	if err := p.Cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, 10*time.Second); code != 130 || !p.Contains("a second signal (interrupt): aborting") {
		t.Fatalf("exit %d after a second SIGINT, want 130 and the abort line\n%s", code, p.Output())
	}
}
