package oldbuild

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Pin is the previous build make test-upgrade runs against: the last
// landed build before inbox wire version 2 (child commands) and checkpoint
// state versions 5 (subagents) and 6 (pending child sends), so it reads
// inbox version 1 and state versions 1 to 4 only. Bump it deliberately,
// to the last landed commit before the shapes the next upgrade case needs
// (docs/upgrade-testing.md).
const Pin = "ca4b7fb731440db4f32236f010b1e590d7ef0786"

// Binaries are the built binaries of one commit.
type Binaries struct {
	Commit  string // the full hash
	Dir     string // the commit's cache directory
	Owner   string // path of bin/owner
	Ingress string // path of bin/ingress
	// Built is true when this call built them (false: reused from the
	// cache); Took is how long the call took, waiting for the lock included.
	Built bool
	Took  time.Duration
}

// Build returns bin/owner and bin/ingress of commit (a hash or any name
// git resolves) of the repository at repo, building them into the cache
// the first time. It fails with ErrMissingCommit or ErrNotAncestor before
// anything is built.
func Build(ctx context.Context, repo, commit string) (Binaries, error) {
	start := time.Now()
	hash, err := resolve(ctx, repo, commit)
	if err != nil {
		return Binaries{}, err
	}
	root, err := cacheRoot()
	if err != nil {
		return Binaries{}, err
	}
	b := Binaries{Commit: hash, Dir: filepath.Join(root, hash)}
	b.Owner, b.Ingress = filepath.Join(b.Dir, "bin", "owner"), filepath.Join(b.Dir, "bin", "ingress")
	unlock, err := lock(ctx, b.Dir+".lock")
	if err != nil {
		return Binaries{}, err
	}
	defer unlock()
	if !complete(b) {
		if err := build(ctx, repo, b); err != nil {
			return Binaries{}, err
		}
		b.Built = true
	}
	b.Took = time.Since(start)
	return b, nil
}

// doneFile marks a cache directory whose binaries are complete; it is
// written last, so a build interrupted half-way is started again.
const doneFile = "done"

func complete(b Binaries) bool {
	for _, p := range []string{filepath.Join(b.Dir, doneFile), b.Owner, b.Ingress} {
		if _, err := os.Stat(p); err != nil {
			return false
		}
	}
	return true
}

// resolve checks that commit is in the clone and an ancestor of HEAD and
// returns its full hash.
func resolve(ctx context.Context, repo, commit string) (string, error) {
	out, err := git(ctx, repo, "rev-parse", "--verify", "--quiet", commit+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("%w: %s (in %s; nothing is fetched: a clone needs the history up to it)", ErrMissingCommit, commit, repo)
	}
	hash := strings.TrimSpace(string(out))
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "merge-base", "--is-ancestor", hash, "HEAD")
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return hash, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return "", fmt.Errorf("%w: %s (%s)", ErrNotAncestor, commit, hash)
	}
	return "", fmt.Errorf("oldbuild: git merge-base --is-ancestor %s HEAD: %w", hash, err)
}

// cacheRoot is $XDG_CACHE_HOME/baton-builds (os.UserCacheDir's choice when
// XDG_CACHE_HOME is unset).
func cacheRoot() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("oldbuild: no cache directory: %w", err)
	}
	root := filepath.Join(base, "baton-builds")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", fmt.Errorf("oldbuild: %w", err)
	}
	return root, nil
}

// lockPoll is how often a waiting Build tries the lock again.
const lockPoll = 100 * time.Millisecond

// lock takes an exclusive flock on path, waiting (until ctx ends) while
// another process or goroutine holds it; the lock ends with the process
// if it dies.
func lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("oldbuild: lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("oldbuild: lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("oldbuild: waiting for %s: %w", path, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

// build extracts the commit's tree into b.Dir/src and builds both
// binaries into b.Dir/bin; the lock is held.
func build(ctx context.Context, repo string, b Binaries) error {
	if err := os.RemoveAll(b.Dir); err != nil {
		return fmt.Errorf("oldbuild: clear %s: %w", b.Dir, err)
	}
	src := filepath.Join(b.Dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return fmt.Errorf("oldbuild: %w", err)
	}
	archive, err := git(ctx, repo, "archive", "--format=tar", b.Commit)
	if err != nil {
		return fmt.Errorf("oldbuild: git archive %s: %w", b.Commit, err)
	}
	if err := extract(bytes.NewReader(archive), src); err != nil {
		return fmt.Errorf("oldbuild: extract %s: %w", b.Commit, err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-o", filepath.Join(b.Dir, "bin")+string(filepath.Separator), "./cmd/owner", "./cmd/ingress")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("oldbuild: go build of %s: %w\n%s", b.Commit, err, out)
	}
	if err := os.RemoveAll(src); err != nil {
		return fmt.Errorf("oldbuild: %w", err)
	}
	return os.WriteFile(filepath.Join(b.Dir, doneFile), []byte(b.Commit+"\n"), 0o644)
}

// extract writes a tar stream's directories, files and symlinks under
// dir, refusing a path that leaves it.
func extract(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		name := filepath.Clean(h.Name)
		if !filepath.IsLocal(name) {
			return fmt.Errorf("path %q leaves the tree", h.Name)
		}
		p := filepath.Join(dir, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			err = writeFile(p, tr, h.FileInfo().Mode().Perm())
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(p string, r io.Reader, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// git runs git -C repo args and returns its standard output.
func git(ctx context.Context, repo string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", repo}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
