//go:build unix

package lockfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-rt/baton/internal/lockfile"
)

func TestHeldLockNamesItsHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l, err := lockfile.Acquire(path, "pid 1 (first)")
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to the open file, so a second open in this
	// process conflicts as another process would.
	_, err = lockfile.Acquire(path, "pid 2 (second)")
	var held *lockfile.HeldError
	if !errors.As(err, &held) || held.Holder != "pid 1 (first)" || !strings.Contains(err.Error(), "pid 1 (first)") {
		t.Fatalf("second Acquire = %v, want a HeldError naming pid 1", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := lockfile.Acquire(path, "pid 3 (third)")
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	defer l2.Release()
	if b, _ := os.ReadFile(path); string(b) != "pid 3 (third)\n" {
		t.Fatalf("lock file holds %q", b)
	}
}

// A lock file left by a process that ended is free: only a live holder
// counts, not the file.
func TestLockOfAnEndedProcessIsFree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	if err := os.WriteFile(path, []byte("pid 99999 (gone)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := lockfile.Acquire(path, "pid 4 (fourth)")
	if err != nil {
		t.Fatalf("Acquire of a stale lock file: %v", err)
	}
	l.Release()
}
