package oldbuild

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// cacheHome points XDG_CACHE_HOME (Build's cache) at a fresh directory,
// keeping Go's own build cache where it was (it defaults to a directory
// under XDG_CACHE_HOME), and returns the directory.
func cacheHome(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOCACHE: %v", err)
	}
	t.Setenv("GOCACHE", strings.TrimSpace(string(out)))
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	return dir
}

// repo is a throwaway git repository of a tiny module whose cmd/owner and
// cmd/ingress print "<name> <mark>": commits a and b on main (HEAD is b),
// and side, a commit on another branch (no ancestor of HEAD).
type repo struct {
	dir        string
	a, b, side string
}

func newRepo(t *testing.T) repo {
	t.Helper()
	r := repo{dir: t.TempDir()}
	r.git(t, "init", "-q", "-b", "main")
	r.commit(t, "a")
	r.a = r.head(t)
	r.commit(t, "b")
	r.b = r.head(t)
	r.git(t, "checkout", "-q", "-b", "side", r.a)
	r.commit(t, "side")
	r.side = r.head(t)
	r.git(t, "checkout", "-q", "main")
	return r
}

func (r repo) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir, "-c", "user.name=test", "-c", "user.email=test@example.com"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func (r repo) head(t *testing.T) string { return r.git(t, "rev-parse", "HEAD") }

func (r repo) commit(t *testing.T, mark string) {
	t.Helper()
	files := map[string]string{"go.mod": "module example.com/tiny\n\ngo 1.26\n"}
	for _, name := range []string{"owner", "ingress"} {
		files["cmd/"+name+"/main.go"] = "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"" + name + " " + mark + "\") }\n"
	}
	for p, body := range files {
		full := filepath.Join(r.dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r.git(t, "add", "-A")
	r.git(t, "commit", "-q", "-m", mark)
}

// gitFiles is every file under the repository's .git with its size and
// modification time: what a mutation would change.
func gitFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(filepath.Join(dir, ".git"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fmt.Sprint(info.ModTime(), info.Mode(), info.Size())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func run(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	return strings.TrimSpace(string(out))
}

// A commit's binaries are built from its own tree into the cache, once,
// without writing to the repository's .git; the next call reuses them.
func TestBuildAndReuse(t *testing.T) {
	cacheHome(t)
	r := newRepo(t)
	before := gitFiles(t, r.dir)
	b, err := Build(t.Context(), r.dir, r.a[:7])
	if err != nil {
		t.Fatal(err)
	}
	if !b.Built || b.Commit != r.a || !strings.HasPrefix(b.Dir, filepath.Join(os.Getenv("XDG_CACHE_HOME"), "baton-builds")) {
		t.Fatalf("first build: %+v", b)
	}
	if got := run(t, b.Owner) + "," + run(t, b.Ingress); got != "owner a,ingress a" {
		t.Fatalf("binaries print %q: not commit a's (HEAD is b)", got)
	}
	again, err := Build(t.Context(), r.dir, r.a)
	if err != nil {
		t.Fatal(err)
	}
	if again.Built || again.Owner != b.Owner || again.Ingress != b.Ingress {
		t.Fatalf("second build: %+v, want the cached binaries of %+v", again, b)
	}
	if after := gitFiles(t, r.dir); !maps.Equal(before, after) {
		t.Fatal("building changed the repository's .git")
	}
	if _, err := os.Stat(filepath.Join(b.Dir, "src")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the extracted tree is kept: %v", err)
	}
}

// Builds of one commit at once build it once and all get its binaries.
func TestConcurrentBuildsBuildOnce(t *testing.T) {
	cacheHome(t)
	r := newRepo(t)
	const n = 4
	var wg sync.WaitGroup
	got := make([]Binaries, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { got[i], errs[i] = Build(context.Background(), r.dir, r.b) })
	}
	wg.Wait()
	built := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if got[i].Built {
			built++
		}
		if got[i].Owner != got[0].Owner {
			t.Fatalf("build %d: %s, build 0: %s", i, got[i].Owner, got[0].Owner)
		}
	}
	if built != 1 {
		t.Fatalf("%d of %d concurrent builds built, want 1", built, n)
	}
	if s := run(t, got[0].Owner); s != "owner b" {
		t.Fatalf("owner prints %q", s)
	}
}

// A build interrupted before its completion mark is done again.
func TestIncompleteBuildIsRedone(t *testing.T) {
	cacheHome(t)
	r := newRepo(t)
	b, err := Build(t.Context(), r.dir, r.b)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(b.Dir, doneFile)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b.Owner, []byte("half-written"), 0o755); err != nil {
		t.Fatal(err)
	}
	again, err := Build(t.Context(), r.dir, r.b)
	if err != nil || !again.Built {
		t.Fatalf("after an interrupted build: %+v %v, want a new build", again, err)
	}
	if s := run(t, again.Owner); s != "owner b" {
		t.Fatalf("owner prints %q", s)
	}
}

// A commit missing from the clone, or not an ancestor of HEAD, fails
// loudly, naming it, and builds nothing.
func TestRefusedCommits(t *testing.T) {
	cache := cacheHome(t)
	r := newRepo(t)
	missing := "0123456789abcdef0123456789abcdef01234567"
	for _, tc := range []struct {
		commit string
		want   error
	}{{missing, ErrMissingCommit}, {r.side, ErrNotAncestor}} {
		_, err := Build(t.Context(), r.dir, tc.commit)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.commit) {
			t.Fatalf("Build(%s) = %v, want %v naming the commit", tc.commit, err, tc.want)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(cache, "baton-builds")); len(entries) != 0 {
		t.Fatalf("refused builds left %d entries in the cache", len(entries))
	}
}

// Pin is in this clone and an ancestor of HEAD (CI clones have the whole
// history): make test-upgrade can build it.
func TestPinIsAnEarlierBuild(t *testing.T) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("not in a git clone: %v", err)
	}
	hash, err := resolve(t.Context(), strings.TrimSpace(string(top)), Pin)
	if err != nil || hash != Pin {
		t.Fatalf("resolve(Pin) = %s, %v", hash, err)
	}
}
