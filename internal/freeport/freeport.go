package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/baton-rt/baton/internal/lockfile"
)

// The ranges of the two picks, both below the kernel's ephemeral range:
// Pick's from Floor up to it, Handed's from HandedFloor up to Floor.
const (
	HandedFloor = 10000
	Floor       = 20000
)

// ErrNoPort is returned when Pick finds too few free ports.
var ErrNoPort = errors.New("freeport: no free port below the ephemeral range")

// rangeFile holds the kernel's ephemeral port range (Linux).
const rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// Pick returns n distinct loopback ports, each free when Pick returns,
// below the ephemeral range (from Floor to its first port). Where that
// range cannot be read or leaves fewer than 1,000 ports below it, the
// ports come from port 0 listeners, as before this package.
func Pick(n int) ([]int, error) {
	lo, ok := ephemeralStart()
	if !ok || lo-Floor < 1000 {
		return fromZero(n)
	}
	span := lo - Floor
	ports := make([]int, 0, n)
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	start := rand.IntN(span)
	for i := 0; i < span && len(ports) < n; i++ {
		p := Floor + (start+i)%span
		if !reserve(p) {
			continue // another test process's, or this one's
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue // taken
		}
		held = append(held, l)
		ports = append(ports, p)
	}
	if len(ports) < n {
		return nil, fmt.Errorf("%w: %d of %d", ErrNoPort, len(ports), n)
	}
	return ports, nil
}

// ephemeralStart reads the first port of the kernel's ephemeral range.
func ephemeralStart() (int, bool) {
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false
	}
	lo, err := strconv.Atoi(f[0])
	return lo, err == nil
}

// fromZero picks n ports by listening on port 0.
func fromZero(n int) ([]int, error) {
	ports := make([]int, n)
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("freeport: %w", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

var (
	handedMu sync.Mutex
	handed   = map[int]bool{} // every port of the blocks Handed returned in this process
)

// Handed returns the first of n consecutive loopback ports, each free
// when Handed returns, in [HandedFloor, Floor): ports for a test to hand
// to processes it starts (make run takes its ingress's port and the
// free ones after it), which no Pick of another test can be given. It
// never returns a block overlapping one it returned before in this
// process, since the processes it was handed to may not listen yet.
func Handed(n int) (int, error) {
	handedMu.Lock()
	defer handedMu.Unlock()
	span := Floor - HandedFloor - n
	start := rand.IntN(span)
next:
	for i := 0; i < span; i++ {
		p := HandedFloor + (start+i)%span
		for q := p; q < p+n; q++ {
			if handed[q] {
				continue next
			}
		}
		for q := p; q < p+n; q++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				continue next // taken
			}
			l.Close()
		}
		for q := p; q < p+n; q++ {
			handed[q] = true
		}
		return p, nil
	}
	return 0, fmt.Errorf("%w: no %d consecutive in [%d, %d)", ErrNoPort, n, HandedFloor, Floor)
}

// reservations are the ports this process picked, each held by a lock
// file in reservationDir until it ends: a port free when picked is only
// free while its server runs, and a server a test restarts on its port
// is down meanwhile. Another test process (make test runs packages in
// parallel, and two runs may share a machine) that picks while it is down
// skips it: it cannot take the lock. The kernel releases a process's locks
// when it ends, however it ends.
var (
	reservedMu sync.Mutex
	reserved   = map[int]*lockfile.Lock{}
)

// reservationDir holds one lock file per reserved port.
var reservationDir = filepath.Join(os.TempDir(), "baton-freeport")

// reserve takes port's lock for this process; false: held by this process
// or another. Where no lock can be made (no temporary directory), every
// port counts as free, as before reservations.
func reserve(port int) bool {
	reservedMu.Lock()
	defer reservedMu.Unlock()
	if reserved[port] != nil {
		return false
	}
	if err := os.MkdirAll(reservationDir, 0o777); err != nil {
		return true
	}
	l, err := lockfile.Acquire(filepath.Join(reservationDir, strconv.Itoa(port)+".lock"), "pid "+strconv.Itoa(os.Getpid()))
	var held *lockfile.HeldError
	switch {
	case errors.As(err, &held):
		return false
	case err != nil:
		return true
	}
	reserved[port] = l
	return true
}
