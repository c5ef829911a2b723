// Package proctest builds Baton's binaries once per test binary and runs them
// as real processes, for tests of flags, exit codes, signals and crashes.
//
// A binary can also come prebuilt: when the environment names a directory
// in BATON_TEST_BINDIR (make test builds one before it runs the tests),
// Build and BuildNoRace take pkg's binary from there if it holds one
// (PrebuiltName), and build it themselves otherwise. Every test binary of
// a run then shares one link of each binary instead of making its own.
package proctest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// TB is what proctest needs of a test: testing.TB satisfies it, and so does
// internal/harness.TB.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// BinDirEnv names the directory of prebuilt binaries (PrebuiltName).
const BinDirEnv = "BATON_TEST_BINDIR"

// PrebuiltName is the file name a prebuilt binary of pkg has in
// BATON_TEST_BINDIR: pkg's import path with every "/" turned into "_",
// then "-race" or "-norace" (how it was built).
func PrebuiltName(pkg string, race bool) string {
	name := strings.ReplaceAll(pkg, "/", "_")
	if race {
		return name + "-race"
	}
	return name + "-norace"
}

var (
	buildMu sync.Mutex
	built   = map[string]string{}
	dir     string
	inMain  bool // Main is running the tests
)

// Main runs a test binary's tests (m is its *testing.M) and then removes
// the binaries Build and BuildNoRace linked for them; prebuilt binaries
// stay. Every test package that builds binaries calls it from its
// TestMain, and Build refuses to link one outside it:
//
//	func TestMain(m *testing.M) { os.Exit(proctest.Main(m)) }
//
// A Main inside another (proctest's own test) links its own binaries and
// leaves the outer one's.
func Main(m interface{ Run() int }) int {
	buildMu.Lock()
	outer, outerDir, outerBuilt := inMain, dir, built
	inMain, dir, built = true, "", map[string]string{}
	buildMu.Unlock()
	code := m.Run()
	buildMu.Lock()
	d := dir
	inMain, dir, built = outer, outerDir, outerBuilt
	buildMu.Unlock()
	if d != "" {
		_ = os.RemoveAll(d)
	}
	return code
}

// Build compiles the main package pkg (e.g. "github.com/baton-rt/baton/cmd/owner")
// once and returns the binary's path.
func Build(t TB, pkg string) string {
	t.Helper()
	return build(t, pkg, true)
}

// BuildNoRace compiles pkg once without the race detector, for tests that run
// many processes where the processes' speed matters more than their own race
// checks (the test binary itself still runs with -race).
func BuildNoRace(t TB, pkg string) string {
	t.Helper()
	return build(t, pkg, false)
}

func build(t TB, pkg string, race bool) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	key := pkg
	if !race {
		key += " norace"
	}
	if p, ok := built[key]; ok {
		return p
	}
	if d := os.Getenv(BinDirEnv); d != "" {
		p := filepath.Join(d, PrebuiltName(pkg, race))
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			built[key] = p
			return p
		}
	}
	if !inMain {
		t.Fatalf("proctest: linking %s outside proctest.Main: call it from the package's TestMain, which removes the binaries", pkg)
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "baton-bin-")
		if err != nil {
			t.Fatalf("proctest: %v", err)
		}
		dir = d
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	args := []string{"build", "-race", "-o", out, pkg}
	if !race {
		out += "-norace"
		args = []string{"build", "-o", out, pkg}
	}
	cmd := exec.Command("go", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	built[key] = out
	return out
}

// Proc is a running binary whose JSON log lines are collected.
type Proc struct {
	Cmd   *exec.Cmd
	mu    sync.Mutex
	lines []map[string]any
	raw   bytes.Buffer
	done  chan struct{}
	err   error
}

// Start runs bin with args; stderr (JSON logs) is parsed line by line. The
// process is killed when the test ends.
func Start(t TB, bin string, args ...string) *Proc {
	t.Helper()
	p, err := Launch(t, bin, args...)
	if err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	return p
}

// Launch is Start for goroutines other than the test's (a supervisor that
// restarts a process): it returns the error instead of failing the test.
func Launch(t TB, bin string, args ...string) (*Proc, error) {
	p := &Proc{Cmd: exec.Command(bin, args...), done: make(chan struct{})}
	stderr, err := p.Cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := p.Cmd.Start(); err != nil {
		return nil, err
	}
	go p.read(stderr)
	t.Cleanup(func() {
		_ = p.Cmd.Process.Kill()
		<-p.done
	})
	return p, nil
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// ExitCode is the exit code of an exited process (-1 while it runs, or
// when a signal ended it).
func (p *Proc) ExitCode() int {
	select {
	case <-p.done:
		return p.Cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

func (p *Proc) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var m map[string]any
		p.mu.Lock()
		p.raw.WriteString(line + "\n")
		if json.Unmarshal([]byte(line), &m) == nil {
			p.lines = append(p.lines, m)
		}
		p.mu.Unlock()
	}
	p.err = p.Cmd.Wait()
	close(p.done)
}

// WaitLog polls until a log line with msg appears and returns it.
func (p *Proc) WaitLog(t TB, msg string, timeout time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if m := p.find(msg); m != nil {
			return m
		}
		select {
		case <-p.done:
			if m := p.find(msg); m != nil {
				return m
			}
			t.Fatalf("process exited before logging %q: %v\n%s", msg, p.err, p.Output())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no log %q within %s\n%s", msg, timeout, p.Output())
	return nil
}

func (p *Proc) find(msg string) map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.lines {
		if m["msg"] == msg {
			return m
		}
	}
	return nil
}

// Wait waits for the process to exit and returns its exit code.
func (p *Proc) Wait(t TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.Cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("process did not exit within %s\n%s", timeout, p.Output())
		return -1
	}
}

// Output is everything the process wrote to stderr so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.raw.String()
}

// Contains reports whether stderr so far contains s.
func (p *Proc) Contains(s string) bool { return strings.Contains(p.Output(), s) }
