package freeport

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/baton-rt/baton/internal/lockfile"
)

// TestPickBelowEphemeralRange: the ports are distinct, free, and below
// the kernel's ephemeral range, where no outgoing connection or port-0
// listener can be given them.
func TestPickBelowEphemeralRange(t *testing.T) {
	lo, ok := ephemeralStart()
	if !ok || lo-Floor < 1000 {
		t.Fatalf("this test needs Linux's %s with room below it: start %d, read %v", rangeFile, lo, ok)
	}
	ports, err := Pick(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < Floor || p >= lo {
			t.Fatalf("port %d outside [%d, %d)", p, Floor, lo)
		}
		if seen[p] {
			t.Fatalf("port %d twice in %v", p, ports)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		l.Close()
	}
}

// TestPickSkipsReservedPorts: a port Pick gave this process is not given
// again, even once free, and one whose lock another process holds is
// skipped (here the lock is taken through a second open file, as another
// process would hold it).
func TestPickSkipsReservedPorts(t *testing.T) {
	first, err := Pick(1)
	if err != nil {
		t.Fatal(err)
	}
	for range 200 {
		again, err := Pick(1)
		if err != nil {
			t.Fatal(err)
		}
		if again[0] == first[0] {
			t.Fatalf("port %d picked twice", first[0])
		}
	}
	lo, _ := ephemeralStart()
	for p := Floor; p < lo; p++ {
		reservedMu.Lock()
		_, mine := reserved[p]
		reservedMu.Unlock()
		if mine {
			continue
		}
		l, err := lockfile.Acquire(filepath.Join(reservationDir, strconv.Itoa(p)+".lock"), "another process")
		if err != nil {
			continue // another test process's already
		}
		defer l.Release()
		if reserve(p) {
			t.Fatalf("port %d reserved although its lock is held", p)
		}
		return
	}
	t.Fatal("no port to hold")
}

// TestHandedApartFromPick: Handed's blocks are free, consecutive, inside
// their own range below Pick's, and never overlap a block handed before
// in this process, even once its ports are free again.
func TestHandedApartFromPick(t *testing.T) {
	const n, blocks = 4, 1000 // 40 % of the range: a block handed twice would show
	seen := map[int]bool{}
	for range blocks {
		p, err := Handed(n)
		if err != nil {
			t.Fatal(err)
		}
		if p < HandedFloor || p+n > Floor {
			t.Fatalf("block %d–%d outside [%d, %d)", p, p+n-1, HandedFloor, Floor)
		}
		for q := p; q < p+n; q++ {
			if seen[q] {
				t.Fatalf("port %d handed twice", q)
			}
			seen[q] = true
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				t.Fatalf("handed port %d not free: %v", q, err)
			}
			l.Close()
		}
	}
	ports, err := Pick(20)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p < Floor {
			t.Fatalf("Pick gave %d, inside Handed's range below %d", p, Floor)
		}
	}
}
