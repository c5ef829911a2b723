//go:build unix

// Package lockfile holds an exclusive lock on a file for as long as a
// process runs: flock(2), so the kernel releases it when the process ends,
// however it ends, and a stale file never blocks anyone. The file holds a
// line naming the holder, so a process refused the lock can say who has it.
// The owner takes one on the store directory of a NATS server it starts
// (no second server ever opens a store in use) and, with --lock-file, one
// for its deployment under make run.
package lockfile

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// HeldError is returned when another process holds the lock.
type HeldError struct {
	Path   string
	Holder string // the holder's line, "" if it wrote none
}

func (e *HeldError) Error() string {
	if e.Holder == "" {
		return fmt.Sprintf("lockfile: %s is held by another process", e.Path)
	}
	return fmt.Sprintf("lockfile: %s is held by %s", e.Path, e.Holder)
}

// Lock is a held lock.
type Lock struct{ f *os.File }

// Acquire takes the lock on path (creating the file) without waiting, and
// writes holder into it. If another process holds it, the error is a
// *HeldError naming that process.
func Acquire(path, holder string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lockfile: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b, _ := os.ReadFile(path)
			return nil, &HeldError{Path: path, Holder: strings.TrimSpace(string(b))}
		}
		return nil, fmt.Errorf("lockfile: %s: %w", path, err)
	}
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(holder+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lockfile: %s: %w", path, err)
	}
	return &Lock{f: f}, nil
}

// Release lets the lock go (closing the file releases it).
func (l *Lock) Release() error { return l.f.Close() }
