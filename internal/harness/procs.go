package harness

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/baton-rt/baton/internal/proctest"
)

// Binaries built once per test binary (proctest), by import path.
const (
	OwnerPkg   = "github.com/baton-rt/baton/cmd/owner"
	IngressPkg = "github.com/baton-rt/baton/cmd/ingress"
)

// OwnerFlags are bin/owner's flags for process pid of dep against url: its
// execution log in execDir, lease TTL ttl, a 1 s sweep, JSON logs at debug;
// then extra (a later flag wins).
func OwnerFlags(url, dep, pid, execDir string, ttl time.Duration, extra ...string) []string {
	return append([]string{
		"--nats-url", url, "--deployment-id", dep, "--process-id", pid,
		"--exec-log", ExecLogPath(execDir, pid), "--lease-ttl", ttl.String(),
		"--sweep-interval", "1s", "--log-format", "json", "--log-level", "debug",
	}, extra...)
}

// IngressFlags are bin/ingress's flags for dep against url listening on
// addr, JSON logs; then extra.
func IngressFlags(url, dep, addr string, extra ...string) []string {
	return append([]string{"--deployment-id", dep, "--nats-url", url, "--listen", addr, "--log-format", "json"}, extra...)
}

// FreeAddr is a loopback address with a port free a moment ago.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// LogCount is how many JSON log lines of p have msg.
func LogCount(p *proctest.Proc, msg string) int {
	return strings.Count(p.Output(), `"msg":"`+msg+`"`)
}

// LastLines is the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Procs is every process a test started, by name and run, so that their
// logs show when the test fails.
type Procs struct {
	mu sync.Mutex
	by map[string][]*proctest.Proc
}

// NewProcs keeps the test's processes. When the test fails (or with
// BATON_TEST_LOGS=1) it logs the last lines of each at the end, and writes
// whole logs into BATON_TEST_LOGDIR if set.
func NewProcs(tb TB, lines int) *Procs {
	ps := &Procs{by: map[string][]*proctest.Proc{}}
	tb.Cleanup(func() {
		if !tb.Failed() && os.Getenv("BATON_TEST_LOGS") != "1" {
			return
		}
		ps.show(tb, lines, os.Getenv("BATON_TEST_LOGDIR"))
	})
	return ps
}

func (ps *Procs) show(tb TB, lines int, dir string) {
	for name, runs := range ps.All() {
		for i, p := range runs {
			tb.Logf("---- %s (run %d) ----\n%s", name, i+1, LastLines(p.Output(), lines))
			if dir != "" {
				file := strings.ReplaceAll(name, " ", "-") + ".log"
				if i > 0 {
					file = fmt.Sprintf("%s.run%d.log", strings.ReplaceAll(name, " ", "-"), i+1)
				}
				_ = os.WriteFile(filepath.Join(dir, file), []byte(p.Output()), 0o644)
			}
		}
	}
}

// Add records a run of the process name.
func (ps *Procs) Add(name string, p *proctest.Proc) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.by[name] = append(ps.by[name], p)
}

// Start starts bin with args as a run of name.
func (ps *Procs) Start(tb TB, name, bin string, args ...string) *proctest.Proc {
	tb.Helper()
	p := proctest.Start(tb, bin, args...)
	ps.Add(name, p)
	return p
}

// All is every run of every process, by name.
func (ps *Procs) All() map[string][]*proctest.Proc {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make(map[string][]*proctest.Proc, len(ps.by))
	for k, v := range ps.by {
		out[k] = slices.Clone(v)
	}
	return out
}

// Signal sends sig to p.
func Signal(p *proctest.Proc, sig syscall.Signal) error { return p.Cmd.Process.Signal(sig) }

// OwnerProc starts bin/owner with args as a run of name and waits until it
// serves (lease acquired, index resumed, responders subscribed).
func (t T) OwnerProc(ps *Procs, name, bin string, args []string, timeout time.Duration) *proctest.Proc {
	t.Helper()
	p := ps.Start(t, name, bin, args...)
	p.WaitLog(t, "owner serving", timeout)
	return p
}

// IngressProc starts bin/ingress with IngressFlags(url, dep, a free
// address, extra…) as a run of name, waits until it logs ready and its
// /readyz answers 200, and returns it with its base URL.
func (t T) IngressProc(ps *Procs, name, bin, url, dep string, timeout time.Duration, extra ...string) (*proctest.Proc, string) {
	t.Helper()
	addr, err := FreeAddr()
	t.Check(err)
	p := ps.Start(t, name, bin, IngressFlags(url, dep, addr, extra...)...)
	p.WaitLog(t, "ingress ready", timeout)
	base := "http://" + addr
	var c Client
	t.Eventually(timeout, name+" ready", func() bool {
		return c.Call(t.Context(), http.MethodGet, base+"/readyz", nil, http.StatusOK, nil) == nil
	})
	return p, base
}
