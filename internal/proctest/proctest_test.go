package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// hello is testdata/hello's import path.
const hello = "github.com/baton-rt/baton/internal/proctest/testdata/hello"

// A binary in BATON_TEST_BINDIR under its PrebuiltName is taken as it is;
// one that is not there is built.
func TestPrebuiltTakenElseBuilt(t *testing.T) {
	bindir := t.TempDir()
	t.Setenv(BinDirEnv, bindir)

	// A prebuilt "binary" (a script, so the test can tell it from a build).
	pre := filepath.Join(bindir, PrebuiltName(hello, false))
	if err := os.WriteFile(pre, []byte("#!/bin/sh\necho prebuilt\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := BuildNoRace(t, hello); got != pre {
		t.Fatalf("BuildNoRace = %s, want the prebuilt %s", got, pre)
	}
	if out := run(t, BuildNoRace(t, hello)); out != "prebuilt" {
		t.Fatalf("prebuilt binary printed %q", out)
	}

	// No race build of it in the directory: Build links its own.
	got := Build(t, hello)
	if strings.HasPrefix(got, bindir) {
		t.Fatalf("Build = %s: no race build is in %s, want one of its own", got, bindir)
	}
	if out := run(t, got); out != "hello" {
		t.Fatalf("built binary printed %q, want hello", out)
	}
}

func TestPrebuiltName(t *testing.T) {
	for _, c := range []struct {
		pkg  string
		race bool
		want string
	}{
		{"github.com/baton-rt/baton/cmd/owner", true, "github.com_baton-rt_baton_cmd_owner-race"},
		{"github.com/nats-io/nats-server/v2", false, "github.com_nats-io_nats-server_v2-norace"},
	} {
		if got := PrebuiltName(c.pkg, c.race); got != c.want {
			t.Errorf("PrebuiltName(%s, %v) = %s, want %s (scripts/testbin.sh writes that name)", c.pkg, c.race, got, c.want)
		}
	}
}

func run(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	return strings.TrimSpace(string(out))
}

// runFunc is a *testing.M whose Run is a function.
type runFunc func() int

func (f runFunc) Run() int { return f() }

// Main removes what Build linked while it ran, and returns Run's code.
func TestMainRemovesItsBinaries(t *testing.T) {
	t.Setenv(BinDirEnv, "")
	var bin string
	code := Main(runFunc(func() int {
		bin = BuildNoRace(t, hello)
		if out := run(t, bin); out != "hello" {
			t.Errorf("built binary printed %q, want hello", out)
		}
		return 3
	}))
	if code != 3 {
		t.Fatalf("Main returned %d, want Run's 3", code)
	}
	if _, err := os.Stat(filepath.Dir(bin)); !os.IsNotExist(err) {
		t.Fatalf("%s is still there after Main: %v", filepath.Dir(bin), err)
	}
}

// fatalTB records Fatalf and ends its goroutine, as testing.T does.
type fatalTB struct{ msg string }

func (f *fatalTB) Helper()        {}
func (f *fatalTB) Cleanup(func()) {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// Outside Main nothing would remove a linked binary: Build refuses.
func TestBuildOutsideMainRefused(t *testing.T) {
	t.Setenv(BinDirEnv, "")
	buildMu.Lock()
	outer, outerBuilt := inMain, built
	inMain, built = false, map[string]string{}
	buildMu.Unlock()
	defer func() {
		buildMu.Lock()
		inMain, built = outer, outerBuilt
		buildMu.Unlock()
	}()
	tb := &fatalTB{}
	done := make(chan string)
	go func() {
		defer close(done)
		done <- Build(tb, hello)
	}()
	if bin, ok := <-done; ok {
		t.Fatalf("Build outside Main linked %s", bin)
	}
	if !strings.Contains(tb.msg, "outside proctest.Main") {
		t.Fatalf("Build outside Main: %q, want the refusal", tb.msg)
	}
}
