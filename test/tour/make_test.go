package tour

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-rt/baton/internal/freeport"
)

// The README's make targets, run as written: `make run`, `make deployment
// DEP=…` and `make stop` in the repository, each in a process group of its
// own as a terminal runs a foreground job, so a Ctrl-C is SIGINT to the
// whole group. Each test gets its own store and ports through the
// Makefile's variables (DATA, NATS_PORT, HTTP_PORT, METRICS_PORT); the
// binaries are built once per test binary into a shared BIN.

// drainWait bounds a drain after Ctrl-C (the owner's --drain-timeout is 30s).
const drainWait = 45 * time.Second

var (
	binOnce sync.Once
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// stack is one laptop: a data directory and the ports make run uses.
type stack struct {
	t   *testing.T
	env []string
	dir string // DATA
}

func newStack(t *testing.T) *stack {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make is not installed: the README commands need it")
	}
	binOnce.Do(func() {
		d, err := os.MkdirTemp("", "baton-tour-bin-")
		if err != nil {
			t.Fatal(err)
		}
		binDir = d
	})
	dir := filepath.Join(t.TempDir(), "data")
	s := &stack{t: t, dir: dir}
	s.env = append(cleanEnv(), "BIN="+binDir, "DATA="+dir,
		"NATS_PORT="+port(t), "HTTP_PORT="+port(t), "METRICS_PORT="+port(t))
	// Whatever happens, the NATS server make run left behind is stopped.
	t.Cleanup(func() {
		if out, err := s.make("stop").wait(30 * time.Second); err != nil {
			t.Logf("make stop: %v\n%s", err, out)
		}
	})
	return s
}

// cleanEnv is the environment without the make variables of a parent make
// (make test runs the tests), which would lend this make its job server.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES":
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (s *stack) value(name string) string {
	for _, kv := range s.env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// job is a make running in its own process group.
type job struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
	err  error
}

func (j *job) Write(b []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.out.Write(b)
}

// make starts `make args...` in the repository root.
func (s *stack) make(args ...string) *job {
	s.t.Helper()
	j := &job{t: s.t, name: "make " + strings.Join(args, " "), done: make(chan struct{})}
	j.cmd = exec.Command("make", args...)
	j.cmd.Dir = "../.."
	j.cmd.Env = s.env
	j.cmd.Stdout, j.cmd.Stderr = j, j
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := j.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	go func() { j.err = j.cmd.Wait(); close(j.done) }()
	s.t.Cleanup(func() {
		_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
		<-j.done
		if s.t.Failed() {
			s.t.Logf("---- %s ----\n%s", j.name, j.output())
		}
	})
	return j
}

func (j *job) output() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.out.String()
}

// waitFor polls the output until it matches re and returns the submatches.
func (j *job) waitFor(re string, timeout time.Duration) []string {
	j.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(timeout)
	for {
		if m := rx.FindStringSubmatch(j.output()); m != nil {
			return m
		}
		select {
		case <-j.done:
			if m := rx.FindStringSubmatch(j.output()); m != nil {
				return m
			}
			j.t.Fatalf("%s ended (%v) before printing %q\n%s", j.name, j.err, re, j.output())
		case <-time.After(25 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			j.t.Fatalf("%s: no %q within %s\n%s", j.name, re, timeout, j.output())
		}
	}
}

// ctrlC is what a terminal does on Ctrl-C: SIGINT to the foreground
// process group.
func (j *job) ctrlC() {
	j.t.Helper()
	if err := syscall.Kill(-j.cmd.Process.Pid, syscall.SIGINT); err != nil {
		j.t.Fatal(err)
	}
}

// wait waits for make to end and returns its output and error.
func (j *job) wait(timeout time.Duration) (string, error) {
	select {
	case <-j.done:
		return j.output(), j.err
	case <-time.After(timeout):
		return j.output(), fmt.Errorf("%s did not end within %s", j.name, timeout)
	}
}

// interrupted checks that make ended by the Ctrl-C and reported no error:
// GNU make, once its recipe has ended, re-raises the SIGINT it got on
// itself (so a shell script running make stops too), and prints "***"
// only for a recipe that failed or was killed.
func (j *job) interrupted(timeout time.Duration) string {
	j.t.Helper()
	out, err := j.wait(timeout)
	if j.cmd.ProcessState == nil {
		j.t.Fatalf("%v\n%s", err, out)
	}
	ws, _ := j.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !(ws.Signaled() && ws.Signal() == syscall.SIGINT || ws.Exited() && ws.ExitStatus() == 0) {
		j.t.Fatalf("%s after Ctrl-C: %v, want the interrupt (or exit 0)\n%s", j.name, err, out)
	}
	if strings.Contains(out, "make: ***") {
		j.t.Fatalf("%s reported an error after a clean drain:\n%s", j.name, out)
	}
	return out
}

// ready is the banner's ingress URL of a deployment.
func (j *job) ready(dep string) string {
	j.t.Helper()
	return j.waitFor(`baton: deployment `+dep+` is running\n  ingress   (http://127\.0\.0\.1:\d+)`, 3*time.Minute)[1]
}

// port is a port for the stack to listen on, from the range
// internal/freeport keeps for ports handed to other processes: below the
// kernel's ephemeral range (32768–60999 on Linux), so that no outgoing
// connection of a test running beside this one holds it, and below the
// range of the embedded servers other tests start (freeport.Pick), so
// that none of them takes it before make run listens (an ingress once
// found another test's NATS server on its port, and the test's POST read
// the server's INFO line). make deployment listens on the first free
// ports after HTTP_PORT and METRICS_PORT: the next few ports are free
// too, and handed to no other stack of this test binary.
func port(t *testing.T) string {
	t.Helper()
	p, err := freeport.Handed(4)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(p)
}
