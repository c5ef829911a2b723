package proctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

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
